// serve_bench: the serving workloads (a benchmark, not a test) and where their time goes.
//
//   serve_bench [--models smollm2_135m,llama3_8b] [--batches 1,8,32,128] [--prompt 512] [--new 128]
//               [--long 32768] [--graphs both|on|off] [--seed 1] [--csv PATH]
//
// Per model and batch size B: B requests of --prompt random byte tokens, --new greedy tokens each,
// all submitted at once; then one request whose context reaches --long tokens. Reported:
//   TTFT p50 / max     submit to first token (the last of a batch waits for the others' prefill)
//   TPOT p50 / p99     gaps between consecutive tokens of a request, over all requests
//   tok/s              generated tokens / wall time of the whole workload
//   decode GB/s        (weights + KV bytes a decode step reads) / mean pure-decode step time,
//                      against the copy roof measured in the same run; floor = bytes / roof,
//                      the fastest a memory-bound step can be
//   KV MiB             pages actually used at the peak, against a dense cache of B sequences at
//                      the model's full context (what a preallocated static cache holds)
//   attn / gemm / rest ms per decode step, from a profiling pass with events around each part
//                      (graphs off in that pass; its steps are a little slower than the timed ones)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "engine.h"

using namespace serving;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(p / 100.0 * double(v.size() - 1) + 0.5));
  return v[i];
}

// Printable bytes, so that a prompt means the same to the byte tokenizer of any model.
std::vector<int32_t> byte_prompt(int n, uint64_t seed) { return random_tokens(n, seed, 32, 95); }

// `batch` greedy requests of `prompt` tokens (prompt b drawn from seed0 + b), submitted together.
std::vector<int> submit_batch(Engine& engine, int batch, int prompt, int new_tokens, uint64_t seed0) {
  std::vector<int> ids;
  for (int b = 0; b < batch; ++b) {
    Request r;
    r.prompt = byte_prompt(prompt, seed0 + b);
    r.max_new_tokens = new_tokens;
    ids.push_back(engine.submit(r));
  }
  return ids;
}

struct Row {
  std::string model, workload;
  int batch = 0, prompt = 0, new_tokens = 0;
  bool graphs = true;
  double ttft_p50 = 0, ttft_max = 0, tpot_p50 = 0, tpot_p99 = 0, tok_s = 0, step_ms = 0, gbs = 0, floor_ms = 0;
  double kv_mib = 0, dense_mib = 0, attn_ms = 0, gemm_ms = 0, other_ms = 0;
  int preemptions = 0;
};

Row run_workload(const std::string& model, uint64_t seed, int batch, int prompt, int new_tokens, bool graphs,
                 double roof_gbs, const std::string& workload) {
  DeviceWeights w = load_model(model, seed, nullptr);
  const ModelConfig c = w.config();
  const double weight_bytes = double(w.bytes());
  EngineConfig ec;
  ec.cuda_graphs = graphs;
  ec.max_context = std::max(prompt + new_tokens, 64);
  const int per_seq = (ec.max_context + ec.block_size - 1) / ec.block_size;
  ec.num_blocks = per_seq * batch + 8;  // everything fits: no preemption in the timed run
  ec.scheduler.max_num_seqs = std::max(batch, 1);
  ec.scheduler.max_step_tokens = std::max(2048, batch);
  ec.scheduler.max_prefill_chunk = 512;
  Engine engine(std::move(w), ec);

  // Warm-up with the workload's own shapes (the same prompts, 3 new tokens): cuBLAS's first call
  // for each GEMM shape, the kernels' module loads and the decode batch size's graph capture are
  // one-time costs, not what a served request pays.
  submit_batch(engine, batch, prompt, 3, seed * 3000);
  engine.run();
  const int steps0 = engine.decode_steps();
  const double decode0 = engine.decode_ms();

  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> ids = submit_batch(engine, batch, prompt, new_tokens, seed * 1000);
  engine.run();
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  Row row;
  row.model = model;
  row.workload = workload;
  row.batch = batch;
  row.prompt = prompt;
  row.new_tokens = new_tokens;
  row.graphs = graphs;
  std::vector<double> ttft, gaps;
  int generated = 0;
  for (int id : ids) {
    const RequestResult& r = engine.result(id);
    if (!r.error.empty()) throw std::runtime_error(r.error);
    ttft.push_back(r.ttft_ms());
    for (size_t i = 1; i < r.token_ms.size(); ++i) gaps.push_back(r.token_ms[i] - r.token_ms[i - 1]);
    generated += int(r.tokens.size());
    row.preemptions += r.preemptions;
  }
  row.ttft_p50 = percentile(ttft, 50);
  row.ttft_max = percentile(ttft, 100);
  row.tpot_p50 = percentile(gaps, 50);
  row.tpot_p99 = percentile(gaps, 99);
  row.tok_s = generated / (wall_ms * 1e-3);
  const int steps = engine.decode_steps() - steps0;
  row.step_ms = steps > 0 ? (engine.decode_ms() - decode0) / steps : 0;
  // A decode step reads every weight once and each sequence's K/V so far (on average the prompt
  // and half the new tokens).
  const double bytes = weight_bytes + double(batch) * (prompt + new_tokens / 2.0) * double(c.kv_bytes_per_token());
  row.gbs = row.step_ms > 0 ? bytes / (row.step_ms * 1e-3) / 1e9 : 0;
  row.floor_ms = bytes / (roof_gbs * 1e9) * 1e3;
  const double page = double(c.kv_bytes_per_token()) * ec.block_size;
  row.kv_mib = page * engine.peak_blocks_used() / (1 << 20);
  row.dense_mib = double(batch) * std::max(c.max_position_embeddings, prompt + new_tokens) *
                  double(c.kv_bytes_per_token()) / (1 << 20);

  // Profiling pass: the same batch, a few decode steps, events around each part.
  engine.runner().set_profiling(true);
  submit_batch(engine, batch, prompt, 8, seed * 2000);
  engine.run();
  engine.runner().set_profiling(false);
  const int n = std::max(engine.profiled_decode_steps(), 1);
  row.attn_ms = engine.decode_profile().attention_ms / n;
  row.gemm_ms = engine.decode_profile().gemm_ms / n;
  row.other_ms = engine.decode_profile().other_ms / n;
  return row;
}

int bench_main(int argc, char** argv) {
  const Args args(argc, argv, {"help"});
  if (args.has("help")) {
    std::printf(
        "usage: serve_bench [--models smollm2_135m,llama3_8b] [--batches 1,8,32,128] [--prompt 512] [--new 128]\n"
        "                   [--long 32768] [--graphs both|on|off] [--seed 1] [--csv PATH]\n");
    return 0;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("serve_bench: no CUDA GPU is visible\n");
    return 2;
  }
  const std::vector<std::string> models = split(args.get("models", "smollm2_135m,llama3_8b"));
  std::vector<int> batches;
  for (const std::string& b : split(args.get("batches", "1,8,32,128"))) batches.push_back(std::stoi(b));
  const int prompt = args.get_int("prompt", 512), new_tokens = args.get_int("new", 128);
  const int long_ctx = args.get_int("long", 32768);
  const std::string graphs = args.get("graphs", "both");
  const uint64_t seed = uint64_t(args.get_int("seed", 1));

  const double roof = measure_copy_roof_gbs();
  const std::string dev = device_name();
  std::printf("serve_bench on %s · copy roof %.0f GB/s (cudaMemcpy D2D, read + write)\n", dev.c_str(), roof);
  std::vector<Row> rows;
  auto report = [&](const Row& r) {
    std::printf(
        "%-14s %-6s B=%-4d graphs %-3s  TTFT p50 %8.1f ms (max %8.1f)  TPOT p50 %7.3f p99 %7.3f ms  %9.1f tok/s  "
        "step %7.3f ms = %5.0f GB/s (floor %6.3f ms, x%.2f)  KV %8.1f MiB (dense %9.1f)  attn/gemm/rest "
        "%.3f/%.3f/%.3f ms\n",
        r.model.c_str(), r.workload.c_str(), r.batch, r.graphs ? "on" : "off", r.ttft_p50, r.ttft_max, r.tpot_p50,
        r.tpot_p99, r.tok_s, r.step_ms, r.gbs, r.floor_ms, r.floor_ms > 0 ? r.step_ms / r.floor_ms : 0, r.kv_mib,
        r.dense_mib, r.attn_ms, r.gemm_ms, r.other_ms);
    std::fflush(stdout);
    rows.push_back(r);
  };
  for (const std::string& m : models) {
    for (int b : batches) {
      if (graphs != "off") report(run_workload(m, seed, b, prompt, new_tokens, true, roof, "batch"));
      if (graphs == "off" || (graphs == "both" && b <= 8))
        report(run_workload(m, seed, b, prompt, new_tokens, false, roof, "batch"));
    }
    if (long_ctx > new_tokens)
      report(run_workload(m, seed, 1, long_ctx - new_tokens, new_tokens, graphs != "off", roof, "long"));
  }
  if (args.has("csv")) {
    std::ofstream f(args.get("csv", ""));
    f << "device,model,workload,batch,prompt,new_tokens,graphs,ttft_ms_p50,ttft_ms_max,tpot_ms_p50,tpot_ms_p99,"
         "tokens_per_s,decode_step_ms,decode_gbs,copy_roof_gbs,tpot_floor_ms,kv_mib,dense_kv_mib,attention_ms,gemm_ms,"
         "other_ms,preemptions\n";
    for (const Row& r : rows)
      f << '"' << dev << "\"," << r.model << ',' << r.workload << ',' << r.batch << ',' << r.prompt << ','
        << r.new_tokens << ',' << (r.graphs ? 1 : 0) << ',' << r.ttft_p50 << ',' << r.ttft_max << ',' << r.tpot_p50
        << ',' << r.tpot_p99 << ',' << r.tok_s << ',' << r.step_ms << ',' << r.gbs << ',' << roof << ',' << r.floor_ms
        << ',' << r.kv_mib << ',' << r.dense_mib << ',' << r.attn_ms << ',' << r.gemm_ms << ',' << r.other_ms << ','
        << r.preemptions << '\n';
    std::printf("(written: %s)\n", args.get("csv", "").c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return bench_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve_bench: error: %s\n", e.what());
    return 1;
  }
}
