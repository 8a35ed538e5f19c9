// Day 11 · Exercise 02 · continuous-batching scheduler — the contract.
//
// A serving engine runs the model in steps. Before each step the scheduler decides which
// sequences take part and with how many tokens, and reserves the KV pages those tokens need in
// 01's KvBlockManager; after the step it advances the sequences and frees the pages of those
// that finished. Host C++ only: the engine (day11-serving/engine) calls it between GPU steps.
//
// A sequence's known tokens are its prompt followed by what it generated so far (total_len);
// the first num_computed of them have their K/V in the cache. A chunk of tokens
// [num_computed, num_computed + n) goes through the model in one step; when it reaches total_len
// the step samples one new token for the sequence (a decode is the chunk of the one token
// sampled last; a prefill may take several steps, one chunk each: chunked prefill).
//
// THE POLICY schedule() implements (the tests check every plan exactly against it):
//
//   budget = max_step_tokens. The running sequences are kept in admission order (oldest first;
//   a re-admitted sequence counts from its new admission).
//
//   1. Running sequences, oldest first. Sequence s wants
//        want = min(total_len − num_computed, max_prefill_chunk, budget)
//      tokens (1 for a decode; more for a prefill that is still being chunked). want == 0 (the
//      budget is spent): s gets nothing this step and keeps its pages. Otherwise reserve the
//      pages with kv.append(s, want); while that fails, PREEMPT the youngest running sequence
//      (the last admitted, which may be s itself) and try again; when s itself was preempted,
//      the running list ends there (s was the youngest). On success s gets the chunk
//      {s, num_computed, want, samples = (num_computed + want == total_len)} and
//      budget −= want.
//      Preempting v (recompute): kv.free(v); v.num_computed = 0; v.num_preemptions += 1;
//      v.state = waiting; v leaves the running list and goes to the FRONT of the waiting queue;
//      its id is appended to plan.preempted. Its generated tokens are kept: on re-admission it
//      prefills prompt_len + num_generated tokens again. Preempting the youngest first, and
//      pushing each to the front, leaves the preempted ones in the queue in admission order.
//   2. Admission, only when step 1 preempted nothing (the sequences just preempted are at the
//      front of the queue, and first come, first served does not skip them). While the waiting
//      queue is not empty, running.size() < max_num_seqs and budget > 0, take the FRONT
//      sequence w:
//        chunk = min(total_len − num_computed, max_prefill_chunk, budget)   (num_computed is 0)
//      If kv.append(w, chunk) fails, admission stops for this step: no preemption to make room
//      for a newcomer and no skipping ahead to a smaller request (FCFS). Otherwise w leaves the
//      queue, becomes running (the youngest), gets the chunk {w, 0, chunk, chunk == total_len},
//      and budget −= chunk.
//
//   The plan lists the chunks of step 1 in running order, then the admitted ones in admission
//   order; each sequence appears at most once; plan.num_tokens() <= max_step_tokens; after
//   schedule(), kv.num_tokens(id) == num_computed + (its chunk's num_tokens, or 0) for every
//   running sequence. schedule() does not change num_computed or num_generated: commit() does.
//
// Why this policy (day11-serving/02_batch_scheduler/README.md): running sequences first, so the
// tokens of those already streaming out (time per output token) are not held up by newcomers'
// prompts; the youngest preempted, because it has the least work to recompute and the oldest
// keeps making progress (which is what guarantees that every sequence finishes); FCFS admission
// so that a long request is never starved by short ones behind it.
#pragma once
#include <deque>
#include <map>
#include <vector>

#include "01_kv_block_manager.h"

namespace serving {

enum class SeqState { kWaiting, kRunning, kFinished };

struct Sequence {
  int id = 0;
  int prompt_len = 0;      // tokens of the prompt
  int max_new_tokens = 0;  // the sequence finishes after this many sampled tokens (or at EOS)
  int num_generated = 0;   // tokens sampled so far
  int num_computed = 0;    // tokens whose K/V are in the cache
  int num_preemptions = 0;
  SeqState state = SeqState::kWaiting;
  int total_len() const { return prompt_len + num_generated; }  // tokens known so far
};

struct SchedulerConfig {
  int max_num_seqs = 64;        // running sequences at most
  int max_step_tokens = 2048;   // token budget of one step: decodes (1 each) + prefill chunks
  int max_prefill_chunk = 512;  // most tokens one sequence processes in one step
};

// One sequence's work in a step: tokens [first_token, first_token + num_tokens) of its known
// tokens go through the model; `samples` is true when the chunk reaches total_len, so the step
// ends with a new token for it (every decode, and a prefill's last chunk).
struct ScheduledChunk {
  int seq_id;
  int first_token;
  int num_tokens;
  bool samples;
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // running sequences first (oldest first), then newly admitted
  std::vector<int> preempted;          // ids preempted during this step's planning, in order
  int num_tokens() const {
    int n = 0;
    for (const ScheduledChunk& c : chunks) n += c.num_tokens;
    return n;
  }
};

class Scheduler {
 public:
  // The scheduler reserves and frees pages of `kv`, which must outlive it and which nothing else
  // may change while it runs. Throws std::invalid_argument naming the field (max_num_seqs,
  // max_step_tokens, max_prefill_chunk) when one is < 1.
  Scheduler(const SchedulerConfig& config, KvBlockManager& kv);

  // Queues a new sequence at the back of the waiting queue: state waiting, num_generated,
  // num_computed and num_preemptions 0 (whatever `seq` holds there). A sequence that could never
  // run throws std::invalid_argument naming the field, and the scheduler is unchanged:
  //   id             < 0, or already added (finished ones included)
  //   prompt_len     < 1
  //   max_new_tokens < 1, or prompt_len + max_new_tokens more than max_blocks_per_seq · block_size
  //                  tokens, or their blocks (blocks_for_tokens) more than the whole cache
  void add(const Sequence& seq);

  // Plans one step by THE POLICY above and reserves the KV pages its chunks need. An empty plan
  // means nothing is waiting or running. Call commit() before the next schedule(): a second
  // schedule() without it throws std::logic_error.
  StepPlan schedule();

  // After the engine ran `plan` (the last one schedule() returned): every chunk's tokens are
  // computed (num_computed += num_tokens); a sampling chunk adds one generated token; a sequence
  // that reached max_new_tokens, or whose id is in `eos` (its sampled token was end-of-sequence),
  // is finished: its pages go back to the pool and it leaves the running list (the others keep
  // their order). `eos` may only name sequences that sampled in this plan, else
  // std::invalid_argument("eos") before any change; commit() without a pending plan throws
  // std::logic_error.
  void commit(const StepPlan& plan, const std::vector<int>& eos = {});

  // The sequence with this id (waiting, running or finished); unknown id: invalid_argument("id").
  const Sequence& sequence(int id) const;
  bool idle() const;                 // nothing waiting or running
  std::vector<int> running() const;  // ids in admission order, oldest first
  std::vector<int> waiting() const;  // ids in queue order, front first
  const SchedulerConfig& config() const { return config_; }

 private:
  Sequence& find(int id);  // unknown id: invalid_argument("id")
  // Preempts the youngest running sequence (recompute, step 1 of THE POLICY); returns its id.
  int preempt_youngest(StepPlan& plan);

  SchedulerConfig config_;
  KvBlockManager& kv_;
  std::map<int, Sequence> seqs_;  // every sequence ever added, by id
  std::vector<int> running_;      // admission order, oldest first
  std::deque<int> waiting_;       // front first
  bool pending_ = false;          // a plan was scheduled and not yet committed
};

}  // namespace serving
