// Day 11 · Exercise 02 · continuous-batching scheduler: running sequences first, chunked prefill under a token budget, preemption by recompute.
// Lesson: day11-serving/02_batch_scheduler/README.md. Test: make test EX=02_batch_scheduler
//
// Host C++ (a CPU_ONLY exercise: this file is compiled by the host compiler). The engine calls
// schedule() before every model step and commit() after it; the policy, exactly, is in
// 02_batch_scheduler.h ("THE POLICY"). The bookkeeping is given: the sequences by id, the
// running list in admission order, the waiting queue, add()'s validation and the accessors.
// You write the preemption, the two halves of a step's plan and the commit.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "02_batch_scheduler.h"
#include "check_args.h"

namespace serving {

Scheduler::Scheduler(const SchedulerConfig& config, KvBlockManager& kv) : config_(config), kv_(kv) {
  const char* who = "Scheduler";
  course::require(config.max_num_seqs >= 1, who, "max_num_seqs",
                  "must be >= 1 (got " + std::to_string(config.max_num_seqs) + ")");
  course::require(config.max_step_tokens >= 1, who, "max_step_tokens",
                  "must be >= 1 (got " + std::to_string(config.max_step_tokens) + ")");
  course::require(config.max_prefill_chunk >= 1, who, "max_prefill_chunk",
                  "must be >= 1 (got " + std::to_string(config.max_prefill_chunk) + ")");
}

void Scheduler::add(const Sequence& seq) {
  // Every check comes before the first change, so a rejected sequence leaves no trace.
  const char* who = "Scheduler::add";
  course::require(seq.id >= 0, who, "id", "must be >= 0 (got " + std::to_string(seq.id) + ")");
  course::require(seqs_.count(seq.id) == 0, who, "id", "is already in use (got " + std::to_string(seq.id) + ")");
  course::require(seq.prompt_len >= 1, who, "prompt_len", "must be >= 1 (got " + std::to_string(seq.prompt_len) + ")");
  course::require(seq.max_new_tokens >= 1, who, "max_new_tokens",
                  "must be >= 1 (got " + std::to_string(seq.max_new_tokens) + ")");
  // In 64 bits: two ints near INT_MAX must not wrap into a small, accepted length.
  const long long longest = static_cast<long long>(seq.prompt_len) + seq.max_new_tokens;
  const long long table_tokens = static_cast<long long>(kv_.max_blocks_per_seq()) * kv_.block_size();
  course::require(longest <= table_tokens, who, "max_new_tokens",
                  "makes prompt_len + max_new_tokens = " + std::to_string(longest) +
                      " tokens, more than one block table holds (max_blocks_per_seq · block_size = " +
                      std::to_string(table_tokens) + ")");
  const long long blocks = (longest + kv_.block_size() - 1) / kv_.block_size();
  course::require(blocks <= kv_.num_blocks(), who, "max_new_tokens",
                  "makes prompt_len + max_new_tokens = " + std::to_string(longest) + " tokens, " +
                      std::to_string(blocks) +
                      " blocks, more than the whole cache (num_blocks = " + std::to_string(kv_.num_blocks()) + ")");
  Sequence s;
  s.id = seq.id;
  s.prompt_len = seq.prompt_len;
  s.max_new_tokens = seq.max_new_tokens;
  seqs_[s.id] = s;
  waiting_.push_back(s.id);
}

Sequence& Scheduler::find(int id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    course::throw_invalid_argument("Scheduler", "id", "is unknown (got " + std::to_string(id) + ")");
  return it->second;
}

const Sequence& Scheduler::sequence(int id) const { return const_cast<Scheduler*>(this)->find(id); }

bool Scheduler::idle() const { return running_.empty() && waiting_.empty(); }

std::vector<int> Scheduler::running() const { return running_; }

std::vector<int> Scheduler::waiting() const { return std::vector<int>(waiting_.begin(), waiting_.end()); }

int Scheduler::preempt_youngest(StepPlan& plan) {
  // TODO(1) (≈ 10 lines): preempt the youngest running sequence by recompute and return its id
  //          (lesson: "Preemption: recompute or swap"): its pages back to the pool, its cached
  //          tokens forgotten and the preemption counted, out of the running list and back to
  //          the waiting queue where it is served next, and its id recorded in the plan. Its
  //          generated tokens stay.
  // snippet-begin: preempt
  const int id = running_.back();
  Sequence& s = find(id);
  kv_.free(id);
  s.num_computed = 0;
  s.num_preemptions += 1;
  s.state = SeqState::kWaiting;
  running_.pop_back();
  waiting_.push_front(id);
  plan.preempted.push_back(id);
  return id;
  // snippet-end: preempt
}

StepPlan Scheduler::schedule() {
  if (pending_) throw std::logic_error("Scheduler::schedule: the previous plan was not committed");
  pending_ = true;
  StepPlan plan;
  int budget = config_.max_step_tokens;

  // Step 1: the running sequences, oldest first (a copy: preemption shortens running_).
  const std::vector<int> order = running_;
  for (const int id : order) {
    if (std::find(running_.begin(), running_.end(), id) == running_.end()) break;  // preempted: it was the youngest
    // TODO(2) (≈ 14 lines): sequence `id`'s chunk for this step (lesson: "Step 1: the running
    //          sequences" and "The token budget"): as many of its uncomputed tokens as the chunk
    //          limit and the budget left allow (none when the budget is spent), pages reserved for
    //          them, preempting the youngest running sequence while they do not fit; then the chunk
    //          in the plan and the budget charged, unless the sequence preempted was this one.
    // snippet-begin: running
    Sequence& s = find(id);
    const int want = std::min({s.total_len() - s.num_computed, config_.max_prefill_chunk, budget});
    if (want == 0) continue;  // budget spent: it keeps its pages and waits this step
    bool self_preempted = false;
    while (!kv_.append(id, want)) {
      if (preempt_youngest(plan) == id) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    plan.chunks.push_back({id, s.num_computed, want, s.num_computed + want == s.total_len()});
    budget -= want;
    // snippet-end: running
  }

  // Step 2: admission, first come first served, only when nobody was preempted in step 1.
  if (!plan.preempted.empty()) return plan;
  // TODO(3) (≈ 12 lines): admit waiting sequences from the front of the queue (lesson: "Step 2:
  //          admission"): while there is a free running slot, budget left and someone waiting, the
  //          front sequence's first chunk, under the chunk limit and the budget; stop at the first
  //          whose pages do not fit, without preempting and without skipping it. An admitted
  //          sequence is running (the youngest) and its chunk is in the plan.
  // snippet-begin: admit
  while (!waiting_.empty() && static_cast<int>(running_.size()) < config_.max_num_seqs && budget > 0) {
    const int id = waiting_.front();
    Sequence& s = find(id);
    const int chunk = std::min({s.total_len() - s.num_computed, config_.max_prefill_chunk, budget});
    if (!kv_.append(id, chunk)) break;  // FCFS: the front waits for pages, nobody overtakes it
    waiting_.pop_front();
    s.state = SeqState::kRunning;
    running_.push_back(id);
    plan.chunks.push_back({id, s.num_computed, chunk, s.num_computed + chunk == s.total_len()});
    budget -= chunk;
  }
  // snippet-end: admit
  return plan;
}

void Scheduler::commit(const StepPlan& plan, const std::vector<int>& eos) {
  if (!pending_) throw std::logic_error("Scheduler::commit: no plan is pending (call schedule() first)");
  for (const int id : eos) {
    const bool sampled = std::any_of(plan.chunks.begin(), plan.chunks.end(),
                                     [id](const ScheduledChunk& c) { return c.seq_id == id && c.samples; });
    course::require(sampled, "Scheduler::commit", "eos",
                    "names sequence " + std::to_string(id) + ", which sampled no token in this plan");
  }
  pending_ = false;
  // TODO(4) (≈ 12 lines): apply the plan (lesson: "Commit: advance, finish, free"): each chunk's
  //          tokens are now computed; a sampling chunk adds a generated token; a sequence with
  //          max_new_tokens generated, or named in eos, is finished: its pages go back to the pool
  //          and it leaves the running list, the others keeping their order.
  // snippet-begin: commit
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence& s = find(c.seq_id);
    s.num_computed += c.num_tokens;
    if (!c.samples) continue;
    s.num_generated += 1;
    const bool at_eos = std::find(eos.begin(), eos.end(), c.seq_id) != eos.end();
    if (s.num_generated < s.max_new_tokens && !at_eos) continue;
    s.state = SeqState::kFinished;
    kv_.free(c.seq_id);
    running_.erase(std::find(running_.begin(), running_.end(), c.seq_id));
  }
  // snippet-end: commit
}

}  // namespace serving
