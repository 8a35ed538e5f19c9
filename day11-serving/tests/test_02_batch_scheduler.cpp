// Tests for day11/02_batch_scheduler: the continuous-batching scheduler (host C++, no GPU).
//
// Two kinds of check:
//   * scripted scenarios whose every plan was worked out by hand from THE POLICY in
//     02_batch_scheduler.h (the lesson's worked example is the first of the preemption ones).
//     A plan is compared as text, one chunk per sequence, `id:first+n` with a `!` when the chunk
//     samples, then `| preempted a b` when the step preempted; e.g. "1:4+1! | preempted 2";
//   * seeded random workloads run to completion, each step checked against the invariants the
//     policy guarantees (budget, one chunk per sequence, chunks that start at num_computed, pages
//     that match the tokens, FCFS admission, youngest-first preemption, progress of the oldest)
//     and, at the end, no page left allocated and every sequence finished with exactly its
//     max_new_tokens (or at its EOS).
// Every loop that waits for the scheduler to finish is bounded: a scheduler that plans nothing
// fails with a message instead of hanging.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "02_batch_scheduler.h"
#include "catch_compat.h"
#include "check_invalid_argument.h"
#include "random.h"

using serving::KvBlockManager;
using serving::ScheduledChunk;
using serving::Scheduler;
using serving::SchedulerConfig;
using serving::SeqState;
using serving::Sequence;
using serving::StepPlan;

namespace {

// "1:0+3! 2:0+5" and, when the step preempted, " | preempted 3 2".
std::string show(const StepPlan& plan) {
  std::ostringstream os;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    os << (i ? " " : "") << c.seq_id << ":" << c.first_token << "+" << c.num_tokens << (c.samples ? "!" : "");
  }
  if (!plan.preempted.empty()) {
    os << (plan.chunks.empty() ? "" : " ") << "| preempted";
    for (int id : plan.preempted) os << " " << id;
  }
  return os.str();
}

std::string show(const std::vector<int>& ids) {
  std::string s = "{";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "}";
}

Sequence seq(int id, int prompt_len, int max_new_tokens) {
  Sequence s;
  s.id = id;
  s.prompt_len = prompt_len;
  s.max_new_tokens = max_new_tokens;
  return s;
}

SchedulerConfig config(int max_num_seqs, int max_step_tokens, int max_prefill_chunk) {
  SchedulerConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_step_tokens = max_step_tokens;
  c.max_prefill_chunk = max_prefill_chunk;
  return c;
}

// Runs the scripted steps: step i must plan expected[i] exactly; then it is committed. After the
// script the scheduler must be idle with every page back in the pool.
void run_script(Scheduler& sched, KvBlockManager& kv, const std::vector<std::string>& expected) {
  for (size_t step = 0; step < expected.size(); ++step) {
    INFO("step " << step + 1 << " (running " << show(sched.running()) << ", waiting " << show(sched.waiting())
                 << " before it)");
    const StepPlan plan = sched.schedule();
    CHECK(show(plan) == expected[step]);
    sched.commit(plan);
  }
  CHECK(sched.idle());
  CHECK(kv.num_free_blocks() == kv.num_blocks());
}

// Plans and commits once; returns the plan.
StepPlan step(Scheduler& sched, const std::vector<int>& eos = {}) {
  const StepPlan plan = sched.schedule();
  sched.commit(plan, eos);
  return plan;
}

}  // namespace

// ------------------------------------------------------------------------------- scripted plans

TEST_CASE("scheduler: running sequences are served before new prompts", "[day11][02_batch_scheduler][quick]") {
  // Budget 4: if the newcomer's prompt went first it would take all 4 tokens and the running
  // sequence's decode would wait a step.
  KvBlockManager kv(16, 4, 8);
  Scheduler sched(config(8, 4, 4), kv);
  sched.add(seq(1, 2, 4));
  {
    INFO("step 1: sequence 1 alone");
    CHECK(show(step(sched)) == "1:0+2!");
  }
  sched.add(seq(2, 8, 2));
  run_script(sched, kv,
             {
                 "1:2+1! 2:0+3",   // the decode first, then 3 of the 4 tokens' budget for the new prompt
                 "1:3+1! 2:3+3",   // sequence 2's prompt goes on in chunks (running order)
                 "1:4+1! 2:6+2!",  // its last 2 prompt tokens: it samples; sequence 1 finishes
                 "2:8+1!",         // sequence 2's second token
             });
}

TEST_CASE("scheduler: a long prompt is chunked under max_prefill_chunk and the budget",
          "[day11][02_batch_scheduler][quick]") {
  SECTION("the chunk limit binds: 3 tokens a step, each chunk starting at num_computed") {
    KvBlockManager kv(8, 4, 4);
    Scheduler sched(config(8, 8, 3), kv);
    sched.add(seq(7, 10, 2));
    sched.add(seq(8, 4, 1));
    const StepPlan first = sched.schedule();
    CHECK(show(first) == "7:0+3 8:0+3");
    // The pages of the scheduled chunks are reserved by schedule(); num_computed moves in commit().
    CHECK(kv.num_tokens(7) == 3);
    CHECK(kv.num_tokens(8) == 3);
    CHECK(sched.sequence(7).num_computed == 0);
    sched.commit(first);
    CHECK(sched.sequence(7).num_computed == 3);
    CHECK(sched.sequence(7).num_generated == 0);
    run_script(sched, kv,
               {
                   "7:3+3 8:3+1!",  // sequence 8 samples its one token and finishes
                   "7:6+3",
                   "7:9+1!",  // the prompt's last token: the first sampled token
                   "7:10+1!",
               });
    CHECK(sched.sequence(7).num_generated == 2);
    CHECK(sched.sequence(8).num_generated == 1);
  }
  SECTION("the budget binds: a prompt takes what the budget leaves, the next one waits") {
    KvBlockManager kv(16, 4, 8);
    Scheduler sched(config(8, 5, 4), kv);
    sched.add(seq(1, 3, 3));
    sched.add(seq(2, 6, 3));
    sched.add(seq(3, 2, 1));
    run_script(sched, kv,
               {
                   "1:0+3! 2:0+2",          // 3 + 2 = 5: sequence 3 waits (budget spent)
                   "1:3+1! 2:2+4!",         // 1 + 4 = 5
                   "1:4+1! 2:6+1! 3:0+2!",  // 1 finishes; 3 fits in what is left and finishes too
                   "2:7+1!",
               });
  }
}

TEST_CASE("scheduler: max_num_seqs caps the running list", "[day11][02_batch_scheduler][quick]") {
  KvBlockManager kv(16, 4, 8);
  Scheduler sched(config(2, 16, 16), kv);
  for (int id = 1; id <= 3; ++id) sched.add(seq(id, 1, 2));
  const StepPlan first = sched.schedule();
  CHECK(show(first) == "1:0+1! 2:0+1!");
  CHECK(show(sched.running()) == "{1,2}");
  CHECK(show(sched.waiting()) == "{3}");
  sched.commit(first);
  run_script(sched, kv, {"1:1+1! 2:1+1!", "3:0+1!", "3:1+1!"});
}

TEST_CASE("scheduler: admission is first come first served", "[day11][02_batch_scheduler][quick]") {
  // 4 blocks of 4 tokens. Sequence 2's prompt needs 3 blocks while sequence 1 holds 2; sequence 3
  // would fit in the one free block, but it came after 2 and must not overtake it.
  KvBlockManager kv(4, 4, 4);
  Scheduler sched(config(8, 32, 32), kv);
  sched.add(seq(1, 8, 4));
  sched.add(seq(2, 9, 2));
  sched.add(seq(3, 1, 1));
  const StepPlan first = sched.schedule();
  CHECK(show(first) == "1:0+8!");
  CHECK(show(sched.waiting()) == "{2,3}");
  sched.commit(first);
  run_script(sched, kv,
             {
                 "1:8+1!",  // its third block
                 "1:9+1!",
                 "1:10+1!",  // sequence 1 finishes: its 3 blocks go back to the pool
                 "2:0+9! 3:0+1!",
                 "2:9+1!",
             });
}

TEST_CASE("scheduler: the youngest is preempted when pages run out and recomputed later",
          "[day11][02_batch_scheduler][quick]") {
  // The lesson's worked example: 4 blocks of 2 tokens, three sequences of a 2-token prompt.
  KvBlockManager kv(4, 2, 4);
  Scheduler sched(config(4, 16, 16), kv);
  sched.add(seq(1, 2, 4));
  sched.add(seq(2, 2, 4));
  sched.add(seq(3, 2, 2));
  {
    INFO("step 1");
    CHECK(show(step(sched)) == "1:0+2! 2:0+2! 3:0+2!");
    CHECK(kv.num_free_blocks() == 1);
  }
  {
    INFO("step 2: 1 takes the last block, 2 finds none and the youngest, 3, is preempted");
    const StepPlan plan = sched.schedule();
    CHECK(show(plan) == "1:2+1! 2:2+1! | preempted 3");
    const Sequence& s3 = sched.sequence(3);
    CHECK(s3.state == SeqState::kWaiting);
    CHECK(s3.num_computed == 0);
    CHECK(s3.num_generated == 1);  // its sampled token is kept: it is recomputed, not lost
    CHECK(s3.num_preemptions == 1);
    CHECK(kv.num_tokens(3) == 0);
    CHECK(show(sched.running()) == "{1,2}");
    CHECK(show(sched.waiting()) == "{3}");
    sched.commit(plan);
  }
  {
    INFO("step 3: sequence 3 needs 2 blocks for its 3 tokens, none is free");
    CHECK(show(step(sched)) == "1:3+1! 2:3+1!");
  }
  {
    INFO("step 4: 1 needs a block again; the youngest running is 2 now");
    const StepPlan plan = sched.schedule();
    CHECK(show(plan) == "1:4+1! | preempted 2");
    CHECK(show(sched.waiting()) == "{2,3}");  // the preempted go to the front
    sched.commit(plan);
  }
  {
    INFO("steps 5 and 6: 2 recomputes prompt + 3 generated tokens, then 3 its 2 + 1");
    run_script(sched, kv, {"2:0+5!", "3:0+3!"});
  }
  CHECK(sched.sequence(1).num_generated == 4);
  CHECK(sched.sequence(2).num_generated == 4);
  CHECK(sched.sequence(3).num_generated == 2);
  CHECK(sched.sequence(1).num_preemptions == 0);
  CHECK(sched.sequence(2).num_preemptions == 1);
  CHECK(sched.sequence(3).num_preemptions == 1);
}

TEST_CASE("scheduler: a sequence that does not fit preempts itself when it is the youngest",
          "[day11][02_batch_scheduler][quick]") {
  KvBlockManager kv(3, 2, 4);
  Scheduler sched(config(4, 16, 16), kv);
  sched.add(seq(1, 2, 3));
  sched.add(seq(2, 2, 3));
  run_script(sched, kv,
             {
                 "1:0+2! 2:0+2!",
                 "1:2+1! | preempted 2",  // 2 needs a block, none is left, and 2 is the youngest
                 "1:3+1!",                // 2 waits: 3 tokens need 2 blocks, 1 is free
                 "2:0+3!",                // 1 finished; 2 recomputes prompt + 1 generated
                 "2:3+1!",
             });
}

TEST_CASE("scheduler: one chunk may preempt several sequences", "[day11][02_batch_scheduler][quick]") {
  // Sequence 1's second prompt chunk needs 2 blocks: preempting 3 frees one, not enough, so 2
  // goes too. They return to the queue in admission order (2 before 3).
  KvBlockManager kv(4, 2, 4);
  Scheduler sched(config(8, 16, 4), kv);
  sched.add(seq(1, 7, 1));
  sched.add(seq(2, 1, 5));
  sched.add(seq(3, 1, 5));
  run_script(sched, kv,
             {
                 "1:0+4 2:0+1! 3:0+1!",
                 "1:4+3! | preempted 3 2",
                 "2:0+2! 3:0+2!",  // each recomputes its prompt token and its first sampled token
                 "2:2+1! 3:2+1!",
                 "2:3+1! 3:3+1!",
                 "2:4+1! | preempted 3",
                 "3:0+4",  // 1 + 4 tokens to recompute, in chunks of at most 4
                 "3:4+1!",
             });
  CHECK(sched.sequence(2).num_preemptions == 1);
  CHECK(sched.sequence(3).num_preemptions == 2);
}

TEST_CASE("scheduler: EOS finishes a sequence early", "[day11][02_batch_scheduler][quick]") {
  KvBlockManager kv(8, 4, 4);
  Scheduler sched(config(8, 16, 16), kv);
  sched.add(seq(1, 5, 8));
  sched.add(seq(2, 2, 3));
  CHECK(show(step(sched)) == "1:0+5! 2:0+2!");
  const StepPlan plan = sched.schedule();
  CHECK(show(plan) == "1:5+1! 2:2+1!");
  sched.commit(plan, {1});
  const Sequence& s1 = sched.sequence(1);
  CHECK(s1.state == SeqState::kFinished);
  CHECK(s1.num_generated == 2);
  CHECK(kv.num_tokens(1) == 0);
  CHECK(show(sched.running()) == "{2}");
  run_script(sched, kv, {"2:3+1!"});
}

// ---------------------------------------------------------------------------- random workloads

namespace {

struct Workload {
  int num_blocks, block_size, max_blocks_per_seq;
  SchedulerConfig cfg;
  std::vector<Sequence> seqs;
  std::vector<int> arrival;  // step at which seqs[i] is added
  double eos_rate;
};

std::string describe(const Workload& w) {
  std::ostringstream os;
  os << "num_blocks=" << w.num_blocks << " block_size=" << w.block_size
     << " max_blocks_per_seq=" << w.max_blocks_per_seq << " max_num_seqs=" << w.cfg.max_num_seqs
     << " max_step_tokens=" << w.cfg.max_step_tokens << " max_prefill_chunk=" << w.cfg.max_prefill_chunk
     << " sequences=" << w.seqs.size() << " eos_rate=" << w.eos_rate;
  return os.str();
}

Workload random_workload(uint64_t seed) {
  course::Rng rng(seed);
  Workload w;
  const int sizes[] = {1, 2, 4, 16};
  w.block_size = sizes[rng.uniform_int(0, 3)];
  w.max_blocks_per_seq = int(rng.uniform_int(2, 64 / w.block_size + 2));
  w.num_blocks = int(rng.uniform_int(w.max_blocks_per_seq, 3 * w.max_blocks_per_seq));
  w.cfg = config(int(rng.uniform_int(1, 8)), int(rng.uniform_int(1, 48)), int(rng.uniform_int(1, 24)));
  const int longest = w.max_blocks_per_seq * w.block_size;
  const int n = int(rng.uniform_int(1, 24));
  for (int i = 0; i < n; ++i) {
    const int prompt = int(rng.uniform_int(1, std::max(1, longest - 1)));
    const int max_new = int(rng.uniform_int(1, longest - prompt));
    w.seqs.push_back(seq(100 + i, prompt, max_new));
    w.arrival.push_back(int(rng.uniform_int(0, 30)));
  }
  w.eos_rate = rng.uniform() < 0.5 ? 0.0 : 0.05;
  return w;
}

// Runs w to completion (at most max_steps steps), checking every step. Returns false when a
// check failed (the failure is already reported).
bool simulate(const Workload& w, uint64_t seed, int max_steps = 20000) {
  course::Rng rng(seed ^ 0x5eed);
  KvBlockManager kv(w.num_blocks, w.block_size, w.max_blocks_per_seq);
  Scheduler sched(w.cfg, kv);
  std::map<int, int> eos_at;  // id -> num_generated at its EOS
  size_t added = 0;
  for (int t = 0; t < max_steps; ++t) {
    for (size_t i = 0; i < w.seqs.size(); ++i)
      if (w.arrival[i] == t) sched.add(w.seqs[i]), ++added;
    if (added == w.seqs.size() && sched.idle()) {
      // Done: every page back, every sequence finished with its tokens.
      if (kv.num_free_blocks() != kv.num_blocks()) {
        FAIL_CHECK("all sequences finished, but " << kv.num_blocks() - kv.num_free_blocks()
                                                  << " blocks are still allocated (pages leaked)");
        return false;
      }
      for (const Sequence& in : w.seqs) {
        const Sequence& s = sched.sequence(in.id);
        const int want = eos_at.count(in.id) ? eos_at[in.id] : in.max_new_tokens;
        if (s.state != SeqState::kFinished || s.num_generated != want) {
          FAIL_CHECK("sequence " << in.id << " ended with " << s.num_generated << " generated tokens (want " << want
                                 << ", max_new_tokens " << in.max_new_tokens << ")");
          return false;
        }
      }
      return true;
    }
    const std::vector<int> running_before = sched.running();
    const std::vector<int> waiting_before = sched.waiting();
    std::map<int, Sequence> before;
    for (int id : running_before) before[id] = sched.sequence(id);
    for (int id : waiting_before) before[id] = sched.sequence(id);

    const StepPlan plan = sched.schedule();
    const std::vector<int> running_after = sched.running();
    const std::vector<int> waiting_after = sched.waiting();
    std::ostringstream where;
    where << "step " << t << ": running " << show(running_before) << " waiting " << show(waiting_before)
          << " -> plan \"" << show(plan) << "\", running " << show(running_after) << " waiting " << show(waiting_after);
    INFO(where.str());

    if (plan.chunks.empty() && !(running_before.empty() && waiting_before.empty())) {
      FAIL_CHECK(
          "schedule() planned nothing although sequences are waiting or running: the oldest running "
          "sequence (or, with none running, the front of the queue) always fits");
      return false;
    }
    if (plan.num_tokens() > w.cfg.max_step_tokens) {
      FAIL_CHECK("the plan has " << plan.num_tokens() << " tokens, more than max_step_tokens");
      return false;
    }
    if (int(running_after.size()) > w.cfg.max_num_seqs) {
      FAIL_CHECK(running_after.size() << " sequences running, more than max_num_seqs");
      return false;
    }
    // Preemption: the youngest first, i.e. plan.preempted is the tail of running_before, reversed.
    const size_t k = plan.preempted.size();
    std::vector<int> tail(running_before.end() - std::min(k, running_before.size()), running_before.end());
    std::reverse(tail.begin(), tail.end());
    if (plan.preempted != tail) {
      FAIL_CHECK("preempted " << show(plan.preempted) << ", but the youngest running are " << show(tail)
                              << " (youngest first)");
      return false;
    }
    // Admission: first come, first served, only in a step without preemption.
    std::vector<int> admitted;
    for (int id : running_after)
      if (std::find(running_before.begin(), running_before.end(), id) == running_before.end()) admitted.push_back(id);
    if (k > 0 && !admitted.empty()) {
      FAIL_CHECK("sequences " << show(admitted) << " were admitted in a step that preempted");
      return false;
    }
    if (admitted.size() > waiting_before.size() ||
        !std::equal(admitted.begin(), admitted.end(), waiting_before.begin())) {
      FAIL_CHECK("admitted " << show(admitted) << ", not the front of the queue " << show(waiting_before));
      return false;
    }
    // Chunks: once per sequence, in running order, each from num_computed, pages reserved.
    std::set<int> seen;
    size_t pos = 0;
    int budget_left = w.cfg.max_step_tokens;
    for (const ScheduledChunk& c : plan.chunks) {
      const Sequence& s = sched.sequence(c.seq_id);
      if (!seen.insert(c.seq_id).second) {
        FAIL_CHECK("sequence " << c.seq_id << " has two chunks in one step");
        return false;
      }
      while (pos < running_after.size() && running_after[pos] != c.seq_id) ++pos;
      if (pos == running_after.size()) {
        FAIL_CHECK("chunk of sequence " << c.seq_id
                                        << " is not in running order (running sequences first, oldest first, "
                                           "then the admitted) or the sequence is not running");
        return false;
      }
      const int left = s.total_len() - s.num_computed;
      const int want = std::min({left, w.cfg.max_prefill_chunk, budget_left});
      if (c.num_tokens < 1) {
        FAIL_CHECK("sequence " << c.seq_id << " has a chunk of " << c.num_tokens << " tokens (at least 1)");
        return false;
      }
      if (c.first_token != s.num_computed || c.num_tokens != want || c.samples != (c.num_tokens == left)) {
        FAIL_CHECK("sequence " << c.seq_id << " (total_len " << s.total_len() << ", num_computed " << s.num_computed
                               << ") got chunk " << c.first_token << "+" << c.num_tokens << (c.samples ? "!" : "")
                               << ": want " << s.num_computed << "+" << want << (want == left ? "!" : "")
                               << " (from num_computed, min(tokens left, max_prefill_chunk, budget left " << budget_left
                               << "))");
        return false;
      }
      budget_left -= c.num_tokens;
      if (kv.num_tokens(c.seq_id) != s.num_computed + c.num_tokens) {
        FAIL_CHECK("sequence " << c.seq_id << " has " << kv.num_tokens(c.seq_id)
                               << " tokens of pages, want num_computed " << s.num_computed << " + its chunk "
                               << c.num_tokens);
        return false;
      }
    }
    // The oldest running sequence always makes progress: it is what guarantees that all finish.
    if (!running_before.empty() && k < running_before.size() &&
        (plan.chunks.empty() || plan.chunks[0].seq_id != running_before[0])) {
      FAIL_CHECK("the oldest running sequence " << running_before[0] << " got no chunk");
      return false;
    }
    // Admission stops only for a reason: no slot, no budget, nobody waiting, or the front does not fit.
    if (k == 0 && !waiting_after.empty() && int(running_after.size()) < w.cfg.max_num_seqs && budget_left > 0) {
      const Sequence& f = sched.sequence(waiting_after.front());
      const int chunk = std::min({f.total_len() - f.num_computed, w.cfg.max_prefill_chunk, budget_left});
      if (kv.can_append(f.id, chunk)) {
        FAIL_CHECK("admission stopped although sequence " << f.id << "'s chunk of " << chunk
                                                          << " tokens fits, a slot is free and budget is left");
        return false;
      }
    }
    // Pages: waiting sequences hold none; running ones exactly num_computed (+ their chunk).
    for (int id : waiting_after) {
      if (kv.num_tokens(id) != 0 || sched.sequence(id).num_computed != 0 ||
          sched.sequence(id).state != SeqState::kWaiting) {
        FAIL_CHECK("waiting sequence " << id << " holds " << kv.num_tokens(id) << " tokens of pages, num_computed "
                                       << sched.sequence(id).num_computed << " (want 0 and 0, state waiting)");
        return false;
      }
    }
    long used = 0;
    for (int id : running_after) {
      const Sequence& s = sched.sequence(id);
      if (s.state != SeqState::kRunning || (!seen.count(id) && kv.num_tokens(id) != s.num_computed)) {
        FAIL_CHECK("running sequence " << id << ": state or pages wrong (pages for " << kv.num_tokens(id)
                                       << " tokens, num_computed " << s.num_computed << ")");
        return false;
      }
      used += serving::blocks_for_tokens(kv.num_tokens(id), w.block_size);
    }
    if (used + kv.num_free_blocks() != kv.num_blocks()) {
      FAIL_CHECK("running sequences hold " << used << " blocks and " << kv.num_free_blocks() << " are free, of "
                                           << kv.num_blocks() << ": pages leaked");
      return false;
    }

    std::vector<int> eos;
    for (const ScheduledChunk& c : plan.chunks)
      if (c.samples && w.eos_rate > 0 && rng.uniform() < w.eos_rate) {
        eos.push_back(c.seq_id);
        eos_at[c.seq_id] = sched.sequence(c.seq_id).num_generated + 1;
      }
    sched.commit(plan, eos);
    for (const ScheduledChunk& c : plan.chunks) {
      const Sequence& s = sched.sequence(c.seq_id);
      const Sequence& b = before[c.seq_id];
      const bool finished = s.num_generated >= s.max_new_tokens || eos_at.count(c.seq_id);
      if (s.num_computed != c.first_token + c.num_tokens || s.num_generated != b.num_generated + (c.samples ? 1 : 0) ||
          (s.state == SeqState::kFinished) != finished || (finished && kv.num_tokens(c.seq_id) != 0)) {
        FAIL_CHECK("after commit, sequence "
                   << c.seq_id << " has num_computed " << s.num_computed << " (want " << c.first_token + c.num_tokens
                   << "), num_generated " << s.num_generated << " (want " << b.num_generated + (c.samples ? 1 : 0)
                   << "), " << (s.state == SeqState::kFinished ? "finished" : "not finished") << " (want "
                   << (finished ? "finished" : "not finished") << ") and pages for " << kv.num_tokens(c.seq_id)
                   << " tokens");
        return false;
      }
    }
  }
  FAIL_CHECK("not finished after " << max_steps << " steps: running " << show(sched.running()) << ", waiting "
                                   << show(sched.waiting()) << " (a sequence starves, or steps plan nothing)");
  return false;
}

}  // namespace

TEST_CASE("scheduler: random workloads run to completion with every invariant", "[day11][02_batch_scheduler]") {
  int passed = 0;
  const int cases = 300;
  for (int i = 0; i < cases; ++i) {
    const uint64_t seed = course::case_seed("02_batch_scheduler random", i);
    const Workload w = random_workload(seed);
    INFO("case " << i << ": " << describe(w));
    if (!simulate(w, seed)) break;  // the first failing case is reported, not 300 of them
    ++passed;
  }
  CHECK(passed == cases);
}

TEST_CASE("scheduler: a tight cache preempts and still finishes everything", "[day11][02_batch_scheduler]") {
  // Every sequence can grow to the whole cache: many preemptions, each recomputed.
  for (int i = 0; i < 40; ++i) {
    const uint64_t seed = course::case_seed("02_batch_scheduler tight", i);
    course::Rng rng(seed);
    Workload w;
    w.block_size = 2;
    w.max_blocks_per_seq = 8;
    w.num_blocks = 8;
    w.cfg = config(int(rng.uniform_int(2, 6)), 32, int(rng.uniform_int(2, 8)));
    for (int s = 0; s < 8; ++s) {
      const int prompt = int(rng.uniform_int(1, 6));
      w.seqs.push_back(seq(s, prompt, int(rng.uniform_int(4, 16 - prompt))));
      w.arrival.push_back(0);
    }
    w.eos_rate = 0;
    INFO("case " << i << ": " << describe(w));
    if (!simulate(w, seed)) break;
    SUCCEED("finished");
  }
}

// ------------------------------------------------------------------------------------- bad input

TEST_CASE("scheduler: add() rejects a sequence that could never run", "[day11][02_batch_scheduler][quick]") {
  // 2 blocks of 4 tokens in the cache, block tables of up to 8 blocks: a sequence may not exceed
  // 2 · 4 = 8 tokens (the cache) nor 8 · 4 = 32 (a table).
  KvBlockManager kv(2, 4, 8);
  Scheduler sched(config(4, 16, 8), kv);
  sched.add(seq(1, 3, 2));
  COURSE_CHECK_INVALID_ARGUMENT("id", sched.add(seq(-1, 3, 2)));
  COURSE_CHECK_INVALID_ARGUMENT("id", sched.add(seq(1, 3, 2)));  // already queued
  COURSE_CHECK_INVALID_ARGUMENT("prompt_len", sched.add(seq(2, 0, 2)));
  COURSE_CHECK_INVALID_ARGUMENT("prompt_len", sched.add(seq(2, -5, 2)));
  COURSE_CHECK_INVALID_ARGUMENT("max_new_tokens", sched.add(seq(2, 3, 0)));
  COURSE_CHECK_INVALID_ARGUMENT("max_new_tokens", sched.add(seq(2, 5, 4)));  // 9 tokens: 3 blocks, the cache has 2
  COURSE_CHECK_INVALID_ARGUMENT("max_new_tokens", sched.add(seq(2, INT_MAX, 1)));  // INT_MAX + 1 must not wrap
  {
    KvBlockManager big(64, 4, 2);
    Scheduler s2(config(4, 16, 8), big);
    COURSE_CHECK_INVALID_ARGUMENT("max_new_tokens", s2.add(seq(2, 6, 3)));  // 9 tokens, a table holds 8
    CHECK(s2.idle());
  }
  INFO("the rejected calls changed nothing");
  CHECK(show(sched.waiting()) == "{1}");
  CHECK(sched.running().empty());
  CHECK(kv.num_free_blocks() == 2);
  COURSE_CHECK_INVALID_ARGUMENT("id", sched.sequence(2));
  sched.add(seq(2, 5, 3));  // 8 tokens: exactly the cache; id 2 is free after the rejections
  CHECK(show(sched.waiting()) == "{1,2}");
  // Fields a caller filled in are reset: a new sequence starts with nothing done.
  Sequence odd = seq(3, 2, 1);
  odd.num_generated = 5;
  odd.num_computed = 7;
  odd.num_preemptions = 2;
  odd.state = SeqState::kFinished;
  sched.add(odd);
  const Sequence& s3 = sched.sequence(3);
  CHECK(s3.num_generated == 0);
  CHECK(s3.num_computed == 0);
  CHECK(s3.num_preemptions == 0);
  CHECK(s3.state == SeqState::kWaiting);
}

TEST_CASE("scheduler: bad configuration and misuse", "[day11][02_batch_scheduler][quick]") {
  KvBlockManager kv(8, 4, 4);
  COURSE_CHECK_INVALID_ARGUMENT("max_num_seqs", Scheduler bad(config(0, 16, 8), kv));
  COURSE_CHECK_INVALID_ARGUMENT("max_step_tokens", Scheduler bad(config(4, 0, 8), kv));
  COURSE_CHECK_INVALID_ARGUMENT("max_prefill_chunk", Scheduler bad(config(4, 16, -1), kv));

  Scheduler sched(config(4, 16, 8), kv);
  CHECK(sched.idle());
  CHECK_THROWS_AS(sched.commit(StepPlan{}), std::logic_error);  // nothing scheduled yet
  sched.add(seq(1, 3, 2));
  sched.add(seq(2, 2, 2));
  const StepPlan plan = sched.schedule();
  CHECK_THROWS_AS(sched.schedule(), std::logic_error);  // the plan above is not committed
  {
    INFO("eos may only name a sequence that sampled in this plan; nothing changes when it does not");
    COURSE_CHECK_INVALID_ARGUMENT("eos", sched.commit(plan, {9}));
    CHECK(sched.sequence(1).num_computed == 0);
    CHECK(sched.sequence(1).num_generated == 0);
  }
  sched.commit(plan);
  CHECK_FALSE(sched.idle());
  CHECK(sched.sequence(1).num_computed == 3);
  CHECK(sched.sequence(1).num_generated == 1);
}
