// serve: generate text with the engine and print one metrics line.
//
//   serve [--model smollm2_135m | llama3_8b[:layers] | tiny | DIR] [--prompt TEXT | --tokens 1,2,3]
//         [--max-new-tokens 64] [--temperature 0] [--top-p 1] [--seed 1] [--no-graphs]
//
// The default model is SmolLM2-135M's shape with random weights drawn on the GPU, so it needs no
// download; its text is noise, its speed is the real model's. The prompt is byte-tokenized
// (model/tokenizer.h); for a checkpoint with its own tokenizer pass --tokens, or use chat.py.
#include <cuda_runtime.h>

#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "engine.h"
#include "tokenizer.h"

using namespace serving;

namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) ids.push_back(std::stoi(item));
  return ids;
}

int serve_main(int argc, char** argv) {
  const Args args(argc, argv, {"no-graphs", "help"});
  if (args.has("help")) {
    std::printf(
        "usage: serve [--model smollm2_135m|llama3_8b[:layers]|tiny|DIR] [--prompt TEXT | --tokens 1,2,3]\n"
        "             [--max-new-tokens 64] [--temperature 0] [--top-p 1] [--seed 1] [--no-graphs]\n");
    return 0;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("serve: no CUDA GPU is visible; the engine needs one (sm_80 or newer)\n");
    return 2;
  }
  const std::string spec = args.get("model", "smollm2_135m");
  const uint64_t seed = uint64_t(args.get_int("seed", 1));
  std::string described;
  DeviceWeights weights = load_model(spec, seed, &described);
  const ModelConfig c = weights.config();
  const size_t weight_bytes = weights.bytes();

  ByteTokenizer tok;
  Request req;
  if (args.has("tokens"))
    req.prompt = parse_ids(args.get("tokens", ""));
  else
    req.prompt = tok.encode(args.get("prompt", "The quick brown fox jumps over the lazy dog. Once upon a time,"));
  req.max_new_tokens = args.get_int("max-new-tokens", 64);
  req.temperature = float(args.get_double("temperature", 0));
  req.top_p = float(args.get_double("top-p", 1));
  req.seed = seed;
  req.stop_at_eos = !is_preset(spec);  // random weights: EOS is as likely as any token, so run to the end

  EngineConfig ec;
  ec.cuda_graphs = !args.has("no-graphs");
  ec.scheduler.max_num_seqs = 1;
  // One sequence: a pool of exactly one full-context sequence, not a fraction of the GPU.
  ec.max_context = c.max_position_embeddings;
  ec.num_blocks = (ec.max_context + ec.block_size - 1) / ec.block_size;
  Engine engine(std::move(weights), ec);

  // A warm-up request of the same shape first: cuBLAS's and the kernels' first-call costs, and
  // the decode graph's capture, are not what a served request pays.
  engine.submit(req);
  engine.run();
  const int id = engine.submit(req);
  engine.run();
  const RequestResult& r = engine.result(id);
  if (!r.error.empty()) {
    std::printf("serve: %s\n", r.error.c_str());
    return 1;
  }

  std::printf("model: %s · %s\n", described.c_str(), device_name().c_str());
  std::printf("prompt (%zu tokens): %s\n", req.prompt.size(), tok.decode(req.prompt, false).c_str());
  std::printf("generated (%zu tokens): %s\n", r.tokens.size(), tok.decode(r.tokens, false).c_str());
  const int n = int(r.tokens.size());
  const double total_ms = r.token_ms.back();
  const double tpot = n > 1 ? (r.token_ms.back() - r.token_ms.front()) / (n - 1) : 0;
  const double page_mib = double(c.kv_bytes_per_token()) * ec.block_size / (1 << 20);
  const double kv_mib = page_mib * engine.peak_blocks_used();
  const double dense_mib = double(c.kv_bytes_per_token()) * ec.max_context / (1 << 20);
  std::printf(
      "TTFT %.2f ms · TPOT %.3f ms · %.1f tok/s · KV cache %.1f MiB (dense would be %.1f MiB) · weights %.0f MiB · "
      "graphs %s · %s\n",
      r.ttft_ms(), tpot, n / (total_ms * 1e-3), kv_mib, dense_mib, double(weight_bytes) / (1 << 20),
      ec.cuda_graphs ? "on" : "off", engine.runner().kernel_summary().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return serve_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve: error: %s\n", e.what());
    return 1;
  }
}
