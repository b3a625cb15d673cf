// Internal to python/: a query's result as Python sees it (skippr._engine.Result).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "query/query.hpp"

namespace skippr::python {

// What must stay open while a result streams: the engine it runs in, and whatever the engine's
// tables read (a pinned store snapshot, for an aggregate's groups).
struct ResultOwner {
  virtual ~ResultOwner() = default;
};

// A statement's result, read once, as rows or as whole columns. The stream is read with the GIL
// released; a signal (Ctrl-C) is raised between batches.
class StreamedResult {
 public:
  StreamedResult(std::shared_ptr<ResultOwner> owner, std::unique_ptr<query::BatchStream> stream)
      : owner_(std::move(owner)),
        stream_(std::move(stream)),
        columns_(stream_->header()),
        column_types_(stream_->column_types()),
        fields_(stream_->fields()) {}
  ~StreamedResult() { Close(); }

  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::string>& column_types() const { return column_types_; }
  // Ends the stream early: the engine and the store snapshot it pins are released now, not when
  // the result is garbage. Reading afterwards raises.
  void Close();
  // Up to `max_rows` rows as tuples; an empty list after the last.
  pybind11::list NextRows(int64_t max_rows);
  // Every row not read yet, column by column: per column (kind, values, nulls) — see results.cpp.
  pybind11::list ReadColumns();
  bool is_exhausted() const { return is_exhausted_; }

 private:
  std::optional<Batch> NextBatch(int64_t max_rows);

  std::shared_ptr<ResultOwner> owner_;
  std::unique_ptr<query::BatchStream> stream_;  // null once closed
  std::vector<std::string> columns_;
  std::vector<std::string> column_types_;
  std::vector<Field> fields_;
  std::optional<Batch> pending_;  // rows of a batch NextRows has not returned yet
  int64_t pending_offset_ = 0;
  bool is_exhausted_ = false;
};

void RegisterResults(pybind11::module_& module);

}  // namespace skippr::python
