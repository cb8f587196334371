#include "exporter/outputs/http/body_stream.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace sockpressure {
namespace {

class GzipStream final : public BodyStream {
 public:
  explicit GzipStream(std::unique_ptr<BodyStream> inner) : inner_(std::move(inner)) {
    // deflate allocates its state once, here: counted for Footprint().
    zs_.opaque = this;
    zs_.zalloc = [](voidpf self, uInt items, uInt size) -> voidpf {
      static_cast<GzipStream*>(self)->state_bytes_ += static_cast<size_t>(items) * size;
      return std::malloc(static_cast<size_t>(items) * size);
    };
    zs_.zfree = [](voidpf, voidpf p) { std::free(p); };
    // windowBits 15 + 16 selects the gzip wrapper.
    if (deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw std::runtime_error("deflateInit2 failed");
    }
  }
  ~GzipStream() override { deflateEnd(&zs_); }

  bool Next(std::string* out) override {
    // deflate keeps what it has not yet emitted, so one piece in may give
    // nothing out: take pieces until something comes out or the body ends.
    const size_t start = out->size();
    while (more_ && out->size() == start) {
      std::string piece;
      more_ = inner_->Next(&piece);
      Deflate(piece, more_ ? Z_NO_FLUSH : Z_FINISH, out);
    }
    return more_;
  }

  size_t Footprint() const override { return state_bytes_ + inner_->Footprint(); }

 private:
  void Deflate(const std::string& in, int flush, std::string* out) {
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs_.avail_in = static_cast<uInt>(in.size());
    int rc = Z_OK;
    do {
      // Room for an eighth of the input (the exposition compresses about
      // tenfold) and at least 16 KB; deflate says when it needs more.
      const size_t at = out->size(), room = std::max<size_t>(in.size() / 8, 16 << 10);
      out->resize(at + room);
      zs_.next_out = reinterpret_cast<Bytef*>(out->data() + at);
      zs_.avail_out = static_cast<uInt>(room);
      rc = deflate(&zs_, flush);
      out->resize(at + room - zs_.avail_out);
      if (rc == Z_STREAM_ERROR) throw std::runtime_error("deflate failed");
    } while (zs_.avail_in > 0 || (flush == Z_FINISH ? rc != Z_STREAM_END : zs_.avail_out == 0));
  }

  std::unique_ptr<BodyStream> inner_;
  z_stream zs_{};
  size_t state_bytes_ = 0;  // what deflate allocated
  bool more_ = true;
};

}  // namespace

std::unique_ptr<BodyStream> NewGzipStream(std::unique_ptr<BodyStream> inner) {
  return std::make_unique<GzipStream>(std::move(inner));
}

std::string ReadAll(BodyStream& stream) {
  std::string all;
  while (stream.Next(&all)) {
  }
  return all;
}

}  // namespace sockpressure
