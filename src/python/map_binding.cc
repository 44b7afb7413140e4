// python/map_binding.cc — a Python function as the engine's per-sample map
// (pipeline/sample_map.h).
//
// PyMap runs on stoker's decode threads and takes the GIL only for the
// user's call: building the sample (numpy views of its slot, no copy; str
// and parsed JSON for text), the call, and reading its dict back. Arrays of
// the shape and dtype the probe sample gave go into the batch's slots; every
// other value is kept here per (batch buffer, slot) and handed out with its
// batch as lists (collect), so no Python loop runs over a batch's samples.
// Thread-safety: the table is guarded by mu_ (the GIL guards the objects).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "observe/clock.h"
#include "pipeline/sample_map.h"
#include "python/array_binding.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::python {

namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// One key of what the map returns, as the probe sample taught it.
struct Output {
  enum Kind { kSlot, kObject };
  std::string key;
  Kind kind = kObject;
  size_t array = 0;  // kSlot: the layout array it is written into
};

class PyMap final : public SampleMap {
 public:
  PyMap(nb::object fn, bool wants_rng) : fn_(std::move(fn)), wants_rng_(wants_rng) {
    nb::module_ np = nb::module_::import_("numpy");
    ndarray_ = np.attr("ndarray");
    generic_ = np.attr("generic");
    asarray_ = np.attr("asarray");
    default_rng_ = np.attr("random").attr("default_rng");
    json_loads_ = nb::module_::import_("json").attr("loads");
  }

  ~PyMap() override {
    // The last reference goes with the Python object (nanobind's shared_ptr
    // holder), so the GIL is held; the table's objects go with it.
    std::lock_guard lock(mu_);
    table_.clear();
  }

  Result<std::vector<MapArray>> Probe(const MapContext& ctx, uint8_t* buffer, uint64_t sample_seed) override {
    nb::gil_scoped_acquire gil;
    std::vector<MapArray> arrays;
    try {
      nb::object out = Call(ctx, buffer, 0, sample_seed);
      if (!nb::isinstance<nb::dict>(out)) return NotDict(out);
      size_t added = 0;
      for (auto [k, v] : nb::borrow<nb::dict>(out)) {
        if (!nb::isinstance<nb::str>(k)) return InvalidArgument("the map's dict has a key that is not a str");
        Output o;
        o.key = nb::cast<std::string>(k);
        if (o.key == "__key__" || o.key == "__url__") continue;  // the engine's own, with every batch
        if (nb::isinstance(v, ndarray_) || nb::isinstance(v, generic_)) {
          nb::object arr = asarray_(v);
          Result<DType> dtype = ParseDTypeName(nb::cast<std::string>(arr.attr("dtype").attr("name")));
          if (dtype.ok()) {
            std::vector<int64_t> shape;
            for (nb::handle d : nb::borrow<nb::tuple>(arr.attr("shape"))) shape.push_back(nb::cast<int64_t>(d));
            o.kind = Output::kSlot;
            // In place where a field's own array has that shape and dtype;
            // else an array of the map's, after the layout's own.
            bool in_place = false;
            for (const FieldLayout& f : ctx.layout.fields) {
              const ArraySlot& a = ctx.layout.arrays[f.arrays[0]];
              if (f.spec.field == o.key && f.arrays.size() == 1 && a.dtype == *dtype && a.sample_shape == shape) {
                o.array = f.arrays[0];
                in_place = true;
              }
            }
            if (!in_place) {
              o.array = ctx.layout.arrays.size() + added++;
              arrays.push_back(MapArray{"map:" + o.key, *dtype, std::move(shape)});
            }
          }  // a dtype the batch cannot hold (object, str): a list
        }
        outputs_.push_back(std::move(o));
      }
    } catch (const nb::python_error& e) {
      return DataLoss(std::string("the map raised ") + e.what());
    } catch (const std::exception& e) {
      return DataLoss(std::string("the map failed: ") + e.what());
    }
    for (const Output& o : outputs_) {
      if (o.kind == Output::kObject) object_keys_.push_back(o.key);
    }
    return arrays;
  }

  Status Apply(const MapContext& ctx, uint8_t* base, int slot, uint64_t sample_seed) override {
    const uint64_t t0 = NowNs();
    uint64_t t1 = 0, t2 = 0;
    Status st;
    {
      nb::gil_scoped_acquire gil;
      t1 = NowNs();
      st = ApplyHeld(ctx, base, slot, sample_seed);
      t2 = NowNs();
    }
    // Taking the GIL and handing it back (CPython makes a thread that drops
    // it wait until a waiting one has it) is the map's GIL contention.
    const uint64_t t3 = NowNs();
    // What one sample's map returned is that sample's fault, as a malformed
    // member is: skip-able, and a StokerError under raise.
    if (!st.ok() && st.code() != StatusCode::kDataLoss) st = DataLoss(st.message());
    calls_.fetch_add(1, std::memory_order_relaxed);
    gil_wait_ns_.fetch_add((t1 - t0) + (t3 - t2), std::memory_order_relaxed);
    call_ns_.fetch_add(t2 - t1, std::memory_order_relaxed);
    return st;
  }

  void CopySlot(const BatchLayout& layout, const uint8_t* base, int from, int to) override {
    if (object_keys_.empty()) return;
    nb::gil_scoped_acquire gil;
    std::lock_guard lock(mu_);
    auto it = table_.find(TableKey(layout, base));
    if (it != table_.end()) it->second[static_cast<size_t>(to)] = it->second[static_cast<size_t>(from)];
  }

  // The batch whose buffer starts at `base`: its slots' other values as
  // {key: [value per slot]}, taken out of the table.
  nb::dict Collect(uintptr_t base, int size) {
    nb::dict out;
    std::vector<nb::object> slots;
    {
      std::lock_guard lock(mu_);
      auto it = table_.find(reinterpret_cast<const uint8_t*>(base));
      if (it != table_.end()) {
        slots = std::move(it->second);
        table_.erase(it);
      }
    }
    for (size_t k = 0; k < object_keys_.size(); ++k) {
      nb::list values;
      for (int s = 0; s < size; ++s) {
        const bool have = static_cast<size_t>(s) < slots.size() && slots[static_cast<size_t>(s)].is_valid();
        values.append(have ? nb::object(nb::borrow<nb::tuple>(slots[static_cast<size_t>(s)])[k]) : nb::none());
      }
      out[nb::str(object_keys_[k].c_str())] = values;
    }
    return out;
  }

  // [(key, layout array index or None)] in the order the probe returned them.
  nb::list Outputs() const {
    nb::list out;
    for (const Output& o : outputs_) {
      if (o.kind == Output::kSlot) {
        out.append(nb::make_tuple(o.key, o.array));
      } else {
        out.append(nb::make_tuple(o.key, nb::none()));
      }
    }
    return out;
  }

  nb::dict Stats() const {
    nb::dict d;
    d["samples"] = calls_.load(std::memory_order_relaxed);
    d["gil_wait_s"] = static_cast<double>(gil_wait_ns_.load(std::memory_order_relaxed)) * 1e-9;
    // From taking the GIL to giving it back: the call, with any work inside
    // it that releases the GIL meanwhile (numpy's) counted too.
    d["call_s"] = static_cast<double>(call_ns_.load(std::memory_order_relaxed)) * 1e-9;
    return d;
  }

  bool has_objects() const { return !object_keys_.empty(); }

 private:
  // A batch's entry in the table: where its '__index__' array starts, which
  // Python finds from the batch it is handed (Loader._mapped_dict).
  static const uint8_t* TableKey(const BatchLayout& layout, const uint8_t* base) {
    return layout.arrays[layout.index_array].At(base, 0);
  }

  static Status NotDict(const nb::object& out) {
    return InvalidArgument("the map returned " + nb::cast<std::string>(nb::str(nb::type_name(out.type()))) +
                           ", not a dict");
  }

  // The sample in `slot` as a dict, then the user's call; the GIL is held.
  nb::object Call(const MapContext& ctx, uint8_t* base, int slot, uint64_t sample_seed) {
    const BatchLayout& layout = ctx.layout;
    nb::dict sample;
    auto view = [&](const ArraySlot& a) {
      std::vector<size_t> shape(a.sample_shape.begin(), a.sample_shape.end());
      nb::ndarray<nb::numpy> array(a.At(base, slot), shape.size(), shape.data(), nb::handle(), nullptr,
                                   ToDlpack(a.dtype));
      return nb::cast(array, nb::rv_policy::reference);
    };
    for (const FieldLayout& f : layout.fields) {
      const ArraySlot& first = layout.arrays[f.arrays[0]];
      nb::str name(f.spec.field.c_str());
      switch (f.spec.kind) {
        case FieldKind::kImage:
        case FieldKind::kNpy:
        case FieldKind::kScalar:
          sample[name] = view(first);
          break;
        case FieldKind::kNpz: {
          nb::dict members;
          for (size_t i = 0; i < f.names.size(); ++i) members[f.names[i].c_str()] = view(layout.arrays[f.arrays[i]]);
          sample[name] = members;
          break;
        }
        case FieldKind::kText:
        case FieldKind::kJson:
        case FieldKind::kBytes: {
          int64_t len = 0;
          std::memcpy(&len, layout.arrays[f.arrays[1]].At(base, slot), sizeof(len));
          const char* data = reinterpret_cast<const char*>(first.At(base, slot));
          if (f.spec.kind == FieldKind::kBytes) {
            sample[name] = nb::bytes(data, static_cast<size_t>(len));
          } else {
            nb::str text(data, static_cast<size_t>(len));  // checked UTF-8 (and JSON) by the decoder
            sample[name] = f.spec.kind == FieldKind::kJson ? json_loads_(text) : nb::object(text);
          }
          break;
        }
      }
    }
    sample["__key__"] = nb::str(ctx.key.data(), ctx.key.size());
    sample["__url__"] = nb::str(ctx.shard.c_str());
    if (!wants_rng_) return fn_(sample);
    return fn_(sample, default_rng_(nb::int_(sample_seed)));
  }

  Status ApplyHeld(const MapContext& ctx, uint8_t* base, int slot, uint64_t sample_seed) {
    try {
      nb::object out = Call(ctx, base, slot, sample_seed);
      if (!nb::isinstance<nb::dict>(out)) return NotDict(out);
      nb::dict d = nb::borrow<nb::dict>(out);
      size_t engine_keys = d.contains("__key__") + d.contains("__url__");
      if (nb::len(d) - engine_keys != outputs_.size()) {
        std::string have;
        for (auto [k, v] : d) (have += have.empty() ? "" : ", ") += nb::cast<std::string>(nb::str(k));
        std::string want;
        for (const Output& o : outputs_) (want += want.empty() ? "" : ", ") += o.key;
        return InvalidArgument("the map returned the keys " + have + "; the first sample's were " + want);
      }
      nb::tuple objects;
      std::vector<nb::object> kept;
      for (const Output& o : outputs_) {
        nb::str key(o.key.c_str());
        if (!d.contains(key)) return InvalidArgument("the map returned no '" + o.key + "' (the first sample did)");
        nb::object v = d[key];
        if (o.kind == Output::kObject) {
          kept.push_back(std::move(v));
          continue;
        }
        STOKER_RETURN_IF_ERROR(WriteArray(ctx.layout.arrays[o.array], o.key, v, base, slot));
      }
      if (!kept.empty()) {
        nb::list l;
        for (nb::object& v : kept) l.append(v);
        std::lock_guard lock(mu_);
        std::vector<nb::object>& slots = table_[TableKey(ctx.layout, base)];
        slots.resize(static_cast<size_t>(ctx.layout.batch_size));
        slots[static_cast<size_t>(slot)] = nb::tuple(l);
      }
      return Status::Ok();
    } catch (const nb::python_error& e) {
      return DataLoss(std::string("the map raised ") + e.what());
    } catch (const std::exception& e) {
      return DataLoss(std::string("the map failed: ") + e.what());
    }
  }

  // One array value into its slot: the probe's shape and dtype, or an error.
  Status WriteArray(const ArraySlot& a, const std::string& key, nb::handle v, uint8_t* base, int slot) {
    using Host = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
    Host arr;
    nb::object held;
    if (!nb::try_cast(v, arr)) {
      held = asarray_(v);
      if (!nb::try_cast(held, arr)) {
        const std::string type = nb::cast<std::string>(nb::str(nb::type_name(v.type())));
        return InvalidArgument("the map's '" + key + "' is a " + type + ", not an array as in the first sample");
      }
    }
    std::vector<int64_t> shape(arr.ndim());
    for (size_t i = 0; i < arr.ndim(); ++i) shape[i] = static_cast<int64_t>(arr.shape(i));
    if (arr.dtype() != ToDlpack(a.dtype) || shape != a.sample_shape) {
      nb::object np_dtype = nb::getattr(v, "dtype", nb::str("?"));
      return InvalidArgument("the map's '" + key + "' is " + nb::cast<std::string>(nb::str(np_dtype)) +
                             ShapeString(shape) + ", expected " + DTypeName(a.dtype) + ShapeString(a.sample_shape) +
                             " as in the first sample");
    }
    uint8_t* dst = a.At(base, slot);
    if (arr.data() != dst) std::memcpy(dst, arr.data(), a.sample_bytes);
    return Status::Ok();
  }

  nb::object fn_;
  const bool wants_rng_;
  nb::object ndarray_, generic_, asarray_, default_rng_, json_loads_;
  std::vector<Output> outputs_;           // set by Probe, read-only after
  std::vector<std::string> object_keys_;  // the kObject outputs' keys, in order
  std::mutex mu_;
  std::unordered_map<const uint8_t*, std::vector<nb::object>> table_;  // guarded by mu_
  std::atomic<uint64_t> calls_{0}, gil_wait_ns_{0}, call_ns_{0};
};

}  // namespace

void RegisterMap(nb::module_& m) {
  nb::class_<PyMap>(m, "SampleMap", "A Python function run on each sample by the decode threads.")
      .def(nb::init<nb::object, bool>(), "fn"_a, "wants_rng"_a)
      .def("collect", &PyMap::Collect, "base"_a, "size"_a,
           "The values that are not batch arrays of the batch whose '__index__' array starts at `base`, as "
           "{key: list}, taken out of the map's table.")
      .def("outputs", &PyMap::Outputs,
           "[(key, index of its array in a batch's arrays, or None for a list)], in the probe's order.")
      .def_prop_ro("has_objects", &PyMap::has_objects)
      .def("stats", &PyMap::Stats,
           "{samples, gil_wait_s, call_s} since the start: taking and handing back the GIL, and the calls "
           "themselves.");
  m.def(
      "set_sample_map", [](LoaderOptions& o, std::shared_ptr<PyMap> map) { o.sample_map = std::move(map); },
      "options"_a, "map"_a, "Sets LoaderOptions' per-sample map.");
}

}  // namespace stoker::python
