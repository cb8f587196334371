#include "exporter/outputs/cgroup_list_stream.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "exporter/outputs/alerts_api.h"

namespace sockpressure {
namespace {

// Cgroups per piece of the streamed list: about 50 KB of pretty JSON with
// Kubernetes-length paths.
constexpr size_t kCgroupsPerPiece = 128;

// The list without its cgroups (CgroupListHead), as protobuf prints it, cut
// in its empty "cgroups" array: the elements go between `open` and `close`.
struct ListFrame {
  std::string open;    // up to the array's "[", included
  std::string close;   // from the array's "]" on
  std::string indent;  // one level of protobuf's pretty printing ("" when not pretty)
};

// The frame of `head`, or nothing when protobuf printed the empty list
// otherwise than `"cgroups": []` on a line of its own when pretty
// (tests/alerting/episodes_test.cc would say so).
std::optional<ListFrame> FrameOf(const std::string& head, bool pretty) {
  const size_t key = head.rfind("\"cgroups\":");
  const size_t open = key == std::string::npos ? key : head.find('[', key);
  if (open == std::string::npos || head.compare(open, 2, "[]") != 0) return std::nullopt;
  ListFrame frame{head.substr(0, open + 1), head.substr(open + 1), ""};
  if (pretty) {
    const size_t line = head.rfind('\n', key);
    if (line == std::string::npos) return std::nullopt;
    frame.indent = head.substr(line + 1, key - line - 1);
  }
  return frame;
}

// One cgroup's JSON, printed by protobuf from its own message. Pretty, it is
// set at the depth the list gives it (`indent` before each line): JSON
// strings hold no raw newline, so every newline starts a line of it.
std::string ElementJson(const api::v1::CgroupState& cgroup, bool pretty, absl::string_view indent) {
  const std::string json = ToJson(cgroup, pretty);
  if (!pretty) return json;
  const absl::string_view lines = absl::StripTrailingAsciiWhitespace(json);
  return absl::StrCat(indent, absl::StrReplaceAll(lines, {{"\n", absl::StrCat("\n", indent)}}));
}

// What goes between two elements of the array, and around them when pretty.
const char* Separator(bool pretty) { return pretty ? ",\n" : ","; }

// The elements of the cgroups [begin, end) of `s` that the list shows,
// comma-separated (a CgroupListPieces::Piece). Episode counters are read
// now: the pieces of one answer may show them a sample apart.
CgroupListPieces::Piece RenderPiece(const Snapshot& s, size_t begin, size_t end, const EpisodeTracker& episodes,
                                    bool only_pressure, bool pretty, absl::string_view element_indent) {
  api::v1::CgroupList list;
  for (size_t i = begin; i < end; ++i) AddCgroupState(s, s.cgroups[i], episodes, only_pressure, &list);
  CgroupListPieces::Piece piece;
  for (const api::v1::CgroupState& cgroup : list.cgroups()) {
    if (!piece.empty()) piece.append(Separator(pretty));
    piece.append(ElementJson(cgroup, pretty, element_indent));
  }
  return piece;
}

// The JSON of BuildCgroupList(), kCgroupsPerPiece cgroups at a time.
//
// Why a stream, not the list's JSON printed once per sample and shared whole
// by its readers: a shared body is whole (4.4 MB pretty at 10,000 cgroups)
// for as long as its slowest reader holds it, and readers that began on
// different samples (one a second) hold one each. A stream holds one piece
// and the snapshot its reader began on, which shares every unchanged
// cgroup's view with the other samples' snapshots (state/snapshot.h). What
// is shared is the rendering (CgroupListPieces): its pieces are copied
// into each answer and let go before the next cycle, whoever still reads.
//
// Everything is printed by protobuf from messages: the frame from the list's
// head (ListFrame), each element from its cgroup's CgroupState.
class CgroupListStream final : public BodyStream {
 public:
  CgroupListStream(std::shared_ptr<const Snapshot> snapshot, const EpisodeTracker& episodes, bool only_pressure,
                   bool pretty, CgroupListPieces* shared)
      : snapshot_(std::move(snapshot)),
        episodes_(episodes),
        only_pressure_(only_pressure),
        pretty_(pretty),
        shared_(shared) {}

  bool Next(std::string* out) override {
    if (!started_ && !Begin(out)) return false;
    // Pieces until one shows a cgroup (?pressure=1 leaves most out) or the list ends.
    const size_t n = snapshot_->cgroups.size();
    bool appended = false;
    while (next_ < n && !appended) {
      std::shared_ptr<const CgroupListPieces::Piece> piece = Take(next_);
      next_ = std::min(n, next_ + kCgroupsPerPiece);
      if (piece->empty()) continue;
      out->append(any_ ? Separator(pretty_) : (pretty_ ? "\n" : ""));
      any_ = appended = true;
      out->append(*piece);
    }
    if (next_ < n) return true;
    if (any_ && pretty_) absl::StrAppend(out, "\n", frame_.indent);
    out->append(frame_.close);
    return false;
  }

 private:
  // Appends the frame's opening. Returns false when it appended the whole
  // body instead: a protobuf that prints the list's frame otherwise.
  bool Begin(std::string* out) {
    started_ = true;
    std::optional<ListFrame> frame = FrameOf(ToJson(CgroupListHead(*snapshot_), pretty_), pretty_);
    if (!frame) {
      out->append(ToJson(BuildCgroupList(*snapshot_, episodes_, only_pressure_), pretty_));
      return false;
    }
    frame_ = std::move(*frame);
    out->append(frame_.open);
    frame_.open.clear();
    return true;
  }

  // The piece that starts at cgroup `begin`, rendered once for every
  // reader of this sample when a cache is shared.
  std::shared_ptr<const CgroupListPieces::Piece> Take(size_t begin) {
    const size_t end = std::min(snapshot_->cgroups.size(), begin + kCgroupsPerPiece);
    // The array's elements are two levels deep: in the list, in its "cgroups".
    const std::string element_indent = frame_.indent + frame_.indent;
    auto render = [&] {
      return RenderPiece(*snapshot_, begin, end, episodes_, only_pressure_, pretty_, element_indent);
    };
    if (shared_ == nullptr) return std::make_shared<const CgroupListPieces::Piece>(render());
    const int variant = (only_pressure_ ? 2 : 0) + (pretty_ ? 1 : 0);
    return shared_->Get(snapshot_->sequence, variant, begin / kCgroupsPerPiece, render);
  }

  std::shared_ptr<const Snapshot> snapshot_;
  const EpisodeTracker& episodes_;
  const bool only_pressure_;
  const bool pretty_;
  CgroupListPieces* shared_;
  bool started_ = false;
  bool any_ = false;  // an element was appended
  size_t next_ = 0;   // the first cgroup of the next piece
  ListFrame frame_;
};

}  // namespace

std::shared_ptr<const CgroupListPieces::Piece> CgroupListPieces::Get(uint64_t sequence, int variant, size_t index,
                                                                     const std::function<Piece()>& render) {
  const std::pair<int, size_t> key{variant, index};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sequence > sequence_) {  // a new sample: the pieces of the last one are no one's now
      pieces_.clear();
      sequence_ = sequence;
    }
    if (sequence == sequence_) {
      auto it = pieces_.find(key);
      if (it != pieces_.end()) return it->second;
    }
  }
  // Rendered without the lock: two readers may render the same piece at
  // once, and one of the two is kept.
  auto piece = std::make_shared<const Piece>(render());
  std::lock_guard<std::mutex> lock(mu_);
  ++rendered_;
  if (sequence == sequence_) pieces_.emplace(key, piece);
  return piece;
}

void CgroupListPieces::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  pieces_.clear();
}

uint64_t CgroupListPieces::rendered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rendered_;
}

std::unique_ptr<BodyStream> NewCgroupListStream(std::shared_ptr<const Snapshot> snapshot,
                                                const EpisodeTracker& episodes, bool only_pressure, bool pretty,
                                                CgroupListPieces* shared) {
  return std::make_unique<CgroupListStream>(std::move(snapshot), episodes, only_pressure, pretty, shared);
}

}  // namespace sockpressure
