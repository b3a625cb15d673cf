// Results as Python reads them: rows as tuples of Python values, or whole columns as numpy arrays
// (numbers, booleans, dates and timestamps) and object arrays (text, bytes, decimals, nested
// values), built from the engine's columnar batches — never through text.
//
// ReadColumns returns, per column, (kind, values, nulls): `kind` is the numpy dtype of `values`
// ("bool", "int64", "float64", "datetime64[D]", "datetime64[us]", "datetime64[us, UTC]" — values
// in UTC — or "object"), `nulls` a bool array (True: NULL) or None when the column has none.
#include "results.hpp"

#include <datetime.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "errors.hpp"

namespace skippr::python {

namespace py = pybind11;

namespace {

constexpr int64_t kRowsPerBatch = 65536;
constexpr int64_t kOrdinalOf1970 = 719163;  // datetime.date(1970, 1, 1).toordinal()
constexpr int64_t kMaxOrdinal = 3652059;    // datetime.date.max.toordinal()
constexpr int64_t kMicrosPerDay = 86'400'000'000;

// Python's types for values that are not built in, imported once.
struct PythonTypes {
  py::object decimal = py::module_::import("decimal").attr("Decimal");
  py::object uuid = py::module_::import("uuid").attr("UUID");
  py::object date_from_ordinal = py::module_::import("datetime").attr("date").attr("fromordinal");
  py::object utc = py::module_::import("datetime").attr("timezone").attr("utc");
  py::object numpy_datetime64 = py::module_::import("numpy").attr("datetime64");

  static const PythonTypes& Get() {
    static PythonTypes* types = new PythonTypes();  // never freed: lives as long as the module
    return *types;
  }
};

std::string Int128Digits(__int128 value) {
  if (value == 0) return "0";
  const bool is_negative = value < 0;
  unsigned __int128 magnitude =
      is_negative ? -static_cast<unsigned __int128>(value) : static_cast<unsigned __int128>(value);
  std::string digits;
  while (magnitude > 0) {
    digits.push_back(static_cast<char>('0' + static_cast<int>(magnitude % 10)));
    magnitude /= 10;
  }
  if (is_negative) digits.push_back('-');
  return std::string(digits.rbegin(), digits.rend());
}

__int128 DecimalAt(const Column& column, int64_t row) {
  const auto [low, high] = column.Decimal128At(row);
  return static_cast<__int128>(static_cast<unsigned __int128>(low) |
                               static_cast<unsigned __int128>(static_cast<uint64_t>(high)) << 64);
}

py::object DateObject(int64_t days) {
  const int64_t ordinal = days + kOrdinalOf1970;
  if (ordinal < 1 || ordinal > kMaxOrdinal) {  // beyond datetime.date: numpy's day
    return PythonTypes::Get().numpy_datetime64(days, "D");
  }
  return PythonTypes::Get().date_from_ordinal(ordinal);
}

py::object TimestampObject(int64_t micros, bool with_zone) {
  const int64_t days = micros >= 0 ? micros / kMicrosPerDay : -((-micros - 1) / kMicrosPerDay) - 1;
  const int64_t micros_of_day = micros - days * kMicrosPerDay;
  const int64_t ordinal = days + kOrdinalOf1970;
  if (ordinal < 1 || ordinal > kMaxOrdinal) {  // beyond datetime.datetime: numpy's microsecond
    return PythonTypes::Get().numpy_datetime64(micros, "us");
  }
  py::object date = PythonTypes::Get().date_from_ordinal(ordinal);
  const int seconds = static_cast<int>(micros_of_day / 1'000'000);
  PyObject* value = PyDateTimeAPI->DateTime_FromDateAndTime(
      PyDateTime_GET_YEAR(date.ptr()), PyDateTime_GET_MONTH(date.ptr()),
      PyDateTime_GET_DAY(date.ptr()), seconds / 3600, seconds / 60 % 60, seconds % 60,
      static_cast<int>(micros_of_day % 1'000'000),
      with_zone ? PythonTypes::Get().utc.ptr() : Py_None, PyDateTimeAPI->DateTimeType);
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

py::object TimeObject(int64_t micros) {
  const int64_t seconds = micros / 1'000'000;
  // 24:00:00 (PostgreSQL's end of day) has no datetime.time: it reads as the last microsecond's
  // successor would, midnight, losing nothing but that spelling.
  PyObject* value =
      PyTime_FromTime(static_cast<int>(seconds / 3600 % 24), static_cast<int>(seconds / 60 % 60),
                      static_cast<int>(seconds % 60), static_cast<int>(micros % 1'000'000));
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

// One value of a column as a Python object (NULL: None).
py::object ValueObject(const Column& column, int64_t row) {
  if (!column.IsValid(row)) return py::none();
  switch (column.type.id()) {
    case TypeId::kBoolean:
      return py::bool_(column.BoolAt(row));
    case TypeId::kInt:
    case TypeId::kLong:
      return py::int_(column.Int64At(row));
    case TypeId::kFloat:
    case TypeId::kDouble:
      return py::float_(column.DoubleAt(row));
    case TypeId::kDecimal:
      return PythonTypes::Get().decimal(Int128Digits(DecimalAt(column, row)) + "E-" +
                                        std::to_string(column.type.decimal_scale()));
    case TypeId::kDate:
      return DateObject(column.Int64At(row));
    case TypeId::kTime:
      return TimeObject(column.Int64At(row));
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return TimestampObject(column.Int64At(row), column.type.id() == TypeId::kTimestampTz);
    case TypeId::kString: {
      const std::string_view text = column.BytesAt(row);
      PyObject* value = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()),
                                             "surrogateescape");
      if (value == nullptr) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(value);
    }
    case TypeId::kBinary:
      return py::bytes(std::string(column.BytesAt(row)));
    case TypeId::kUuid:
      return PythonTypes::Get().uuid(py::arg("bytes") =
                                         py::bytes(std::string(column.BytesAt(row))));
    case TypeId::kStruct: {
      py::dict object;
      for (size_t i = 0; i < column.children.size(); ++i) {
        object[py::str(column.type.children()[i].name)] = ValueObject(column.children[i], row);
      }
      return std::move(object);
    }
    case TypeId::kList: {
      py::list list;
      for (int64_t i = column.offsets[row]; i < column.offsets[row + 1]; ++i) {
        list.append(ValueObject(column.children[0], i));
      }
      return std::move(list);
    }
    case TypeId::kMap: {
      py::dict map;
      for (int64_t i = column.offsets[row]; i < column.offsets[row + 1]; ++i) {
        map[ValueObject(column.children[0], i)] = ValueObject(column.children[1], i);
      }
      return std::move(map);
    }
  }
  return py::none();
}

// A malloc'd buffer that grows by realloc: glibc grows a large block in place (mremap), so a
// column of n values peaks near n values, not the 2n of copying into a doubled vector.
class GrowableBuffer {
 public:
  GrowableBuffer() = default;
  GrowableBuffer(GrowableBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  GrowableBuffer& operator=(GrowableBuffer&&) = delete;
  ~GrowableBuffer() { std::free(data_); }

  void Append(const void* bytes, size_t size) {
    Reserve(size_ + size);
    std::memcpy(static_cast<char*>(data_) + size_, bytes, size);
    size_ += size;
  }
  void AppendZeros(size_t size) {
    Reserve(size_ + size);
    std::memset(static_cast<char*>(data_) + size_, 0, size);
    size_ += size;
  }
  char* data() { return static_cast<char*>(data_); }
  size_t size() const { return size_; }

  // The bytes as a numpy array of `dtype`, which then owns (and frees) them.
  py::array ToArray(const py::dtype& dtype) && {
    const size_t count = size_ / static_cast<size_t>(dtype.itemsize());
    void* data = size_ > 0 ? std::realloc(data_, size_) : data_;
    if (data == nullptr) data = data_;
    data_ = nullptr;
    size_ = capacity_ = 0;
    py::capsule owner(data, [](void* pointer) { std::free(pointer); });
    return py::array(dtype, std::vector<py::ssize_t>{static_cast<py::ssize_t>(count)},
                     std::vector<py::ssize_t>{}, data, owner);
  }

 private:
  void Reserve(size_t size) {
    if (size <= capacity_) return;
    const size_t capacity = std::max<size_t>({size, capacity_ + capacity_ / 2, 4096});
    void* grown = std::realloc(data_, capacity);
    if (grown == nullptr) throw std::bad_alloc();
    data_ = grown;
    capacity_ = capacity;
  }

  void* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The numpy dtype a column of `type` is read into (ReadColumns' kinds).
std::string ColumnKind(const LogicalType& type) {
  switch (type.id()) {
    case TypeId::kBoolean:
      return "bool";
    case TypeId::kInt:
    case TypeId::kLong:
      return "int64";
    case TypeId::kFloat:
    case TypeId::kDouble:
      return "float64";
    case TypeId::kDate:
      return "datetime64[D]";
    case TypeId::kTimestamp:
      return "datetime64[us]";
    case TypeId::kTimestampTz:
      return "datetime64[us, UTC]";
    default:
      return "object";
  }
}

// One result column, gathered batch by batch.
class ColumnAccumulator {
 public:
  explicit ColumnAccumulator(const LogicalType& type) : kind_(ColumnKind(type)) {}
  ColumnAccumulator(ColumnAccumulator&&) = default;
  ~ColumnAccumulator() {
    for (PyObject* object : objects_) Py_XDECREF(object);
  }

  // Rows [begin, end) of `column`.
  void Append(const Column& column, int64_t begin, int64_t end) {
    AppendNulls(column, begin, end);
    const auto rows = static_cast<size_t>(end - begin);
    if (kind_ == "object") {
      objects_.reserve(objects_.size() + rows);
      for (int64_t row = begin; row < end; ++row) {
        objects_.push_back(ValueObject(column, row).release().ptr());
      }
    } else {  // booleans 1 byte; int64 and double values, days and microseconds 8, as stored
      const size_t width = kind_ == "bool" ? 1 : 8;
      values_.Append(column.fixed.data() + static_cast<size_t>(begin) * width, rows * width);
    }
    rows_ += end - begin;
  }

  py::tuple Finish() && {
    py::object nulls = has_nulls_ ? py::object(std::move(nulls_).ToArray(py::dtype("bool")))
                                  : py::object(py::none());
    if (kind_ != "object") {
      const std::string dtype = kind_ == "datetime64[us, UTC]" ? "datetime64[us]" : kind_;
      return py::make_tuple(kind_, std::move(values_).ToArray(py::dtype(dtype)), nulls);
    }
    py::array objects(py::dtype("O"),
                      std::vector<py::ssize_t>{static_cast<py::ssize_t>(objects_.size())});
    auto** slots = static_cast<PyObject**>(objects.mutable_data());
    for (size_t i = 0; i < objects_.size(); ++i) {
      Py_XDECREF(slots[i]);  // numpy may have filled the new array with None
      slots[i] = objects_[i];
    }
    objects_.clear();
    return py::make_tuple(kind_, std::move(objects), nulls);
  }

 private:
  // Null flags are kept once the first NULL arrives (all false before it).
  void AppendNulls(const Column& column, int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const bool is_null = !column.IsValid(row);
      if (is_null && !has_nulls_) {
        has_nulls_ = true;
        nulls_.AppendZeros(static_cast<size_t>(rows_ + row - begin));
      }
      if (has_nulls_) {
        const uint8_t flag = is_null ? 1 : 0;
        nulls_.Append(&flag, 1);
      }
    }
  }

  std::string kind_;
  GrowableBuffer values_;
  GrowableBuffer nulls_;
  bool has_nulls_ = false;
  int64_t rows_ = 0;
  std::vector<PyObject*> objects_;  // owned references
};

}  // namespace

void StreamedResult::Close() {
  pending_.reset();
  stream_.reset();  // before the engine it reads
  owner_.reset();
}

std::optional<Batch> StreamedResult::NextBatch(int64_t max_rows) {
  if (is_exhausted_) return std::nullopt;
  if (stream_ == nullptr) {
    ThrowStatus(Status::InvalidArgument("this result is closed; run the query again"));
  }
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C while reading
  Result<std::optional<Batch>> next = [&] {
    py::gil_scoped_release release;
    return stream_->Next(max_rows);
  }();
  if (!next.ok()) {
    is_exhausted_ = true;
    ThrowStatus(next.status());
  }
  if (!*next) {
    is_exhausted_ = true;
    Close();  // the last row is read: let go of the engine
  }
  return std::move(*next);
}

py::list StreamedResult::NextRows(int64_t max_rows) {
  py::list rows;
  while (static_cast<int64_t>(rows.size()) < max_rows) {
    if (!pending_ || pending_offset_ >= pending_->num_rows) {
      pending_ = NextBatch(kRowsPerBatch);
      pending_offset_ = 0;
      if (!pending_) break;
    }
    for (; pending_offset_ < pending_->num_rows && static_cast<int64_t>(rows.size()) < max_rows;
         ++pending_offset_) {
      py::tuple row(pending_->columns.size());
      for (size_t c = 0; c < pending_->columns.size(); ++c) {
        row[c] = ValueObject(pending_->columns[c], pending_offset_);
      }
      rows.append(std::move(row));
    }
  }
  return rows;
}

py::list StreamedResult::ReadColumns() {
  std::vector<ColumnAccumulator> accumulators;
  for (const Field& field : fields_) accumulators.emplace_back(field.type);
  if (pending_) {  // the rest of the batch NextRows was reading
    for (size_t c = 0; c < accumulators.size(); ++c) {
      accumulators[c].Append(pending_->columns[c], pending_offset_, pending_->num_rows);
    }
    pending_.reset();
  }
  while (std::optional<Batch> batch = NextBatch(kRowsPerBatch)) {
    for (size_t c = 0; c < accumulators.size(); ++c) {
      accumulators[c].Append(batch->columns[c], 0, batch->num_rows);
    }
  }
  py::list columns;
  for (ColumnAccumulator& accumulator : accumulators)
    columns.append(std::move(accumulator).Finish());
  return columns;
}

void RegisterResults(py::module_& module) {
  PyDateTime_IMPORT;
  py::class_<StreamedResult>(module, "Result",
                             "A statement's result, read once: as rows, or as whole columns.")
      .def_property_readonly("columns", &StreamedResult::columns, "The column names.")
      .def_property_readonly("column_types", &StreamedResult::column_types,
                             "The columns' SQL types, as DuckDB names them.")
      .def_property_readonly("is_exhausted", &StreamedResult::is_exhausted,
                             "Whether every row has been read.")
      .def("next_rows", &StreamedResult::NextRows, py::arg("max_rows"),
           "Up to max_rows more rows as tuples; an empty list after the last.")
      .def("read_columns", &StreamedResult::ReadColumns,
           "Every row not read yet, per column as (kind, values, nulls).")
      .def("close", &StreamedResult::Close,
           "Ends the stream now, releasing the engine and the snapshot it reads.");
}

}  // namespace skippr::python
