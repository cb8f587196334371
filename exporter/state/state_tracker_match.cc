// StateTracker: which state belongs to which of a sample's cgroups, and
// what is kept of the cgroups a sample did not see.
#include "exporter/state/state_tracker.h"

#include <algorithm>

namespace sockpressure {

std::vector<StateTracker::CgroupState*> StateTracker::Match(const Sample& sample, uint64_t stamp, bool* reused) {
  // Match states to this sample's cgroups; a path whose id changed is a new
  // cgroup with the old name, so its state starts over.
  // In place: a cgroup seen last time keeps its entry (no copy of 10,000
  // paths and states per sample); what is not stamped with this sample's
  // number afterwards was not seen.
  if (sample.cgroups_same_as_last && last_states_.size() == sample.cgroups.size()) {
    // The collector vouches for the same cgroups in the same order: the
    // last matching stands (no lookup of 10,000 paths when nothing came or went).
    std::vector<CgroupState*> states = std::move(last_states_);
    for (CgroupState* st : states) st->seen = stamp;
    *reused = true;
    return states;
  }
  return MatchStates(sample, stamp);
}

// Matches states to the sample's cgroups by path and id (see Update()).
std::vector<StateTracker::CgroupState*> StateTracker::MatchStates(const Sample& sample, uint64_t stamp) {
  std::vector<CgroupState*> states;
  states.reserve(sample.cgroups.size());
  for (const CgroupReading& c : sample.cgroups) {
    auto it = states_.find(c.path);
    if (it != states_.end() && it->second.id == c.id) {
      // Seen last time: the same cgroup.
      it->second.seen = stamp;
      states.push_back(&it->second);
      continue;
    }
    CgroupState st;
    auto gone = unseen_.find(c.path);
    if (it != states_.end()) {
      // Recreated under the same name since the last sample: starts over.
    } else if (gone != unseen_.end() && gone->second.state.id == c.id) {
      st = std::move(gone->second.state);
      st.have_prev = false;
      st.rebaseline = true;
      st.scan_carry = st.steal_carry = 0;
    } else if (!last_complete_) {
      st.rebaseline = true;  // may have been there, unseen, all along
    }
    if (gone != unseen_.end()) unseen_.erase(gone);
    st.id = c.id;
    st.seen = stamp;
    if (it != states_.end()) {
      it->second = std::move(st);
      states.push_back(&it->second);
    } else {
      states.push_back(&states_.emplace(c.path, std::move(st)).first->second);
    }
  }
  return states;
}

void StateTracker::ForgetUnseen(const Sample& sample, uint64_t stamp) {
  // What is not stamped was not seen this time: gone after a complete walk,
  // possibly only unseen after an incomplete one.
  std::unordered_map<std::string, CgroupState> vanished;
  if (states_.size() > sample.cgroups.size()) {
    for (auto it = states_.begin(); it != states_.end();) {
      if (it->second.seen == stamp) {
        ++it;
        continue;
      }
      auto node = states_.extract(it++);
      vanished.insert(std::move(node));
    }
    // An unordered_map never shrinks its bucket array by itself.
    if (states_.bucket_count() > 2 * states_.size() + 1024) states_.rehash(0);
  }
  KeepUnseen(vanished, sample);
}

void StateTracker::KeepUnseen(std::unordered_map<std::string, CgroupState>& vanished, const Sample& sample) {
  if (sample.cgroups_complete) {
    // Every cgroup was read: whatever is missing was removed.
    unseen_.clear();
    if (unseen_.bucket_count() > kMinUnseenCapacity) unseen_.rehash(0);
    return;
  }
  for (auto& [path, st] : vanished) {
    if (sample.IndexOfId(st.id) >= 0) continue;  // moved under a new path? never merge
    unseen_[path] = Unseen{std::move(st), sample.monotonic_seconds};
  }
  for (auto it = unseen_.begin(); it != unseen_.end();) {
    bool expired = sample.monotonic_seconds - it->second.since > kUnseenExpirySeconds;
    it = expired ? unseen_.erase(it) : std::next(it);
  }
  size_t cap = std::max(kMinUnseenCapacity, sample.cgroups.size());
  if (unseen_.size() <= cap) return;
  // Over capacity: forget the longest unseen first.
  std::vector<std::pair<double, std::string>> by_age;
  by_age.reserve(unseen_.size());
  for (const auto& [path, u] : unseen_) by_age.emplace_back(u.since, path);
  std::sort(by_age.begin(), by_age.end());
  for (size_t i = 0; i < by_age.size() - cap; ++i) unseen_.erase(by_age[i].second);
}

}  // namespace sockpressure
