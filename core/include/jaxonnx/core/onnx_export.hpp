// IR -> ONNX ModelProto bytes, with large initializers as external data.
// Implemented in onnx_export.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jaxonnx/core/ir.hpp"

namespace jaxonnx {

// Which initializers export_onnx writes as external data (onnx's
// data_location = EXTERNAL) instead of inside the model.
struct ExternalDataOptions {
  enum Mode { kNever, kAuto, kAlways, kInline };
  // kAuto: only when the model would not fit protobuf's 2 GB otherwise.
  // kInline: as kAlways, for a caller that puts the tensors back into its own
  // ModelProto (so the 2 GB limit still applies): they cross without copies.
  Mode mode = kNever;
  uint64_t threshold = 1024;  // main-graph initializers of at least this many bytes
  std::string location;       // the data file's name, relative to the model's folder
  bool per_tensor = false;    // one file per tensor, named location + "." + tensor name
};

// One external data file: the tensors it holds and where. It keeps them alive,
// so it can be written after the model it came from is gone.
struct DataFile {
  struct Piece {
    std::shared_ptr<const Tensor> tensor;
    uint64_t offset;
  };
  std::string location;
  uint64_t size = 0;
  std::vector<Piece> pieces;
  // Streams the tensors' own memory to `fd` (zero padding between them).
  // `written` (may be null) is called with the bytes written so far.
  void write_to(int fd, const std::function<void(uint64_t)>& written = {}) const;
};

// A model's serialization in pieces: text protobuf wrote, and between them the
// memory of the large main-graph initializers (their raw_data), so that the
// weights are copied once, by whoever takes the bytes (str(), a Python bytes).
struct SerializedModel {
  struct Piece {
    std::string text;                     // when tensor is null
    std::shared_ptr<const Tensor> tensor;  // its bytes, kept alive
  };
  std::vector<Piece> pieces;
  uint64_t size = 0;  // of all pieces
  void copy_to(char* out) const;  // size bytes
  std::string str() const;
};

// export_onnx's serialization as pieces; the bytes are the same.
SerializedModel serialize_onnx(const ir::Model& model, const ExternalDataOptions& external = {},
                               std::vector<DataFile>* data_files = nullptr);

// Serializes to an ONNX ModelProto (IR version 10). Large initializers go to
// `data_files` as `external` says; throws ConversionError (naming the external
// data option) when the model would still be over protobuf's 2 GB limit.
std::string export_onnx(const ir::Model& model, const ExternalDataOptions& external = {},
                        std::vector<DataFile>* data_files = nullptr);

}  // namespace jaxonnx
