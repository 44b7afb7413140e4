// python/token_binding.cc — Megatron token datasets for Python: the reader
// and writer (formats/megatron_index.h), TokenOptions for the loader, and the
// index builders (pipeline/gpt_indices.h) exposed so tests can hold them
// against megatron-core and numpy. Thin: each call forwards to C++ with the
// GIL released where it computes; arrays come back as owned numpy copies.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "core/numpy_random.h"
#include "formats/megatron_index.h"
#include "io/reader.h"
#include "pipeline/gpt_indices.h"
#include "pipeline/sequence_packing.h"
#include "python/status_binding.h"
#include "stoker/loader.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::python {

namespace {

template <typename T>
nb::object ToNumpy(std::vector<T> v, std::vector<size_t> shape = {}) {
  if (shape.empty()) shape = {v.size()};
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule base(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  nb::ndarray<nb::numpy, T> array(owned->data(), shape.size(), shape.data(), base);
  return nb::cast(array, nb::rv_policy::reference);
}

using I64Array = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using I32Array = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

}  // namespace

void RegisterTokens(nb::module_& m) {
  nb::class_<TokenOptions>(m, "TokenOptions")
      .def(nb::init<>())
      .def_rw("paths", &TokenOptions::paths)
      .def_rw("weights", &TokenOptions::weights)
      .def_rw("seq_len", &TokenOptions::seq_len)
      .def_rw("num_samples", &TokenOptions::num_samples)
      .def_rw("split", &TokenOptions::split)
      .def_rw("split_index", &TokenOptions::split_index)
      .def_rw("add_extra_token", &TokenOptions::add_extra_token)
      .def_rw("cache_dir", &TokenOptions::cache_dir)
      .def_rw("consumed_samples", &TokenOptions::consumed_samples);

  nb::class_<MegatronDataset>(m, "MegatronDataset")
      .def_static(
          "open",
          [](const std::string& prefix) {
            Result<std::unique_ptr<MegatronDataset>> r = [&] {
              nb::gil_scoped_release release;
              return MegatronDataset::Open(prefix);
            }();
            return ValueOrRaise(std::move(r));
          },
          "prefix"_a)
      .def_prop_ro("dtype", [](const MegatronDataset& d) { return std::string(DTypeName(d.dtype())); })
      .def_prop_ro("dtype_code", &MegatronDataset::dtype_code)
      .def_prop_ro("bin_bytes", &MegatronDataset::bin_bytes)
      .def("__len__", &MegatronDataset::num_sequences)
      .def_prop_ro("sequence_lengths", [](const MegatronDataset& d) { return ToNumpy(d.sequence_lengths()); })
      .def_prop_ro("sequence_pointers", [](const MegatronDataset& d) { return ToNumpy(d.sequence_pointers()); })
      .def_prop_ro("document_indices", [](const MegatronDataset& d) { return ToNumpy(d.document_indices()); })
      .def(
          "get",
          [](const MegatronDataset& d, size_t i) {
            if (i >= d.num_sequences()) Raise(InvalidArgument("sequence " + std::to_string(i) + " out of range"));
            std::vector<int64_t> out(static_cast<size_t>(d.sequence_lengths()[i]));
            Status st;
            {
              nb::gil_scoped_release release;  // a remote .bin: a request
              st = d.CopyTokens(i, 0, static_cast<int64_t>(out.size()), out.data());
            }
            if (!st.ok()) Raise(std::move(st));
            return ToNumpy(std::move(out));
          },
          "i"_a, "Sequence i as int64.");

  nb::class_<MegatronWriter>(m, "MegatronWriter")
      .def_static(
          "create",
          [](const std::string& prefix, const std::string& dtype) {
            return ValueOrRaise(MegatronWriter::Create(prefix, ValueOrRaise(ParseDTypeName(dtype))));
          },
          "prefix"_a, "dtype"_a)
      .def("add",
           [](MegatronWriter& w, I64Array tokens) {
             Status st = [&] {
               nb::gil_scoped_release release;
               return w.AddDocument(std::span<const int64_t>(tokens.data(), tokens.shape(0)));
             }();
             OkOrRaise(st);
           })
      .def(
          "add_documents",
          [](MegatronWriter& w, I64Array tokens, I64Array lengths) {
            Status st = [&]() -> Status {
              nb::gil_scoped_release release;
              const int64_t* at = tokens.data();
              const int64_t* end = at + tokens.shape(0);
              for (size_t d = 0; d < lengths.shape(0); ++d) {
                const int64_t n = lengths.data()[d];
                if (n < 0 || n > end - at) {
                  return InvalidArgument("add_documents: document " + std::to_string(d) + "'s length " +
                                         std::to_string(n) + " runs past the " + std::to_string(tokens.shape(0)) +
                                         " tokens given");
                }
                STOKER_RETURN_IF_ERROR(w.AddDocument(std::span<const int64_t>(at, static_cast<size_t>(n))));
                at += n;
              }
              if (at != end) return InvalidArgument("add_documents: the lengths cover fewer tokens than given");
              return Status::Ok();
            }();
            OkOrRaise(st);
          },
          "tokens"_a, "lengths"_a, "Documents given as their tokens end to end and each one's length.")
      .def("finish", [](MegatronWriter& w) {
        Status st = [&] {
          nb::gil_scoped_release release;
          return w.Finish();
        }();
        OkOrRaise(st);
      });

  m.def(
      "plan_packing",
      [](I64Array lengths, int64_t seq_len, const std::string& algorithm, bool truncate) {
        const PackAlgorithm algo = ValueOrRaise(ParsePackAlgorithm(algorithm));
        Result<PackPlan> r = [&] {
          nb::gil_scoped_release release;
          return PlanPacking(std::span<const int64_t>(lengths.data(), lengths.shape(0)), seq_len, algo, truncate);
        }();
        PackPlan plan = ValueOrRaise(std::move(r));
        return nb::make_tuple(ToNumpy(std::move(plan.row_offsets)), ToNumpy(std::move(plan.documents)));
      },
      "lengths"_a, "seq_len"_a, "algorithm"_a = "first_fit", "truncate"_a = false,
      "(row_offsets, documents): documents packed into rows of seq_len tokens, first-fit or best-fit "
      "decreasing; row r holds documents[row_offsets[r]:row_offsets[r + 1]].");

  nb::class_<PackedRows>(m, "PackedRows")
      .def_static(
          "create",
          [](const std::string& prefix, int64_t seq_len, const std::string& algorithm,
             std::optional<I64Array> prompt_lengths, bool truncate, int64_t pad_id) {
            const PackAlgorithm algo = ValueOrRaise(ParsePackAlgorithm(algorithm));
            std::vector<int64_t> prompt;
            if (prompt_lengths) prompt.assign(prompt_lengths->data(), prompt_lengths->data() + prompt_lengths->shape(0));
            Result<std::unique_ptr<PackedRows>> r = [&]() -> Result<std::unique_ptr<PackedRows>> {
              nb::gil_scoped_release release;
              STOKER_ASSIGN_OR_RETURN(auto data, MegatronDataset::Open(prefix));
              return PackedRows::Create(std::move(data), seq_len, algo, std::move(prompt), truncate, pad_id);
            }();
            return ValueOrRaise(std::move(r));
          },
          "prefix"_a, "seq_len"_a, "algorithm"_a = "first_fit", "prompt_lengths"_a = nb::none(),
          "truncate"_a = false, "pad_id"_a = 0)
      .def_prop_ro("num_rows", [](const PackedRows& p) { return p.plan().rows(); })
      .def_prop_ro("seq_len", [](const PackedRows& p) { return p.plan().seq_len; })
      .def_prop_ro("tokens", [](const PackedRows& p) { return p.plan().tokens; })
      .def_prop_ro("padding_fraction", [](const PackedRows& p) { return p.plan().padding_fraction(); })
      .def_prop_ro("row_offsets", [](const PackedRows& p) { return ToNumpy(p.plan().row_offsets); })
      .def_prop_ro("documents", [](const PackedRows& p) { return ToNumpy(p.plan().documents); })
      .def(
          "fill",
          [](const PackedRows& p, I64Array rows) {
            Result<PackedBatch> r = [&] {
              nb::gil_scoped_release release;
              return p.Fill(std::span<const int64_t>(rows.data(), rows.shape(0)));
            }();
            PackedBatch b = ValueOrRaise(std::move(r));
            const size_t n = rows.shape(0), L = static_cast<size_t>(p.plan().seq_len);
            nb::dict out;
            out["tokens"] = ToNumpy(std::move(b.tokens), {n, L});
            out["labels"] = ToNumpy(std::move(b.labels), {n, L});
            out["loss_mask"] = ToNumpy(std::move(b.loss_mask), {n, L});
            out["position_ids"] = ToNumpy(std::move(b.position_ids), {n, L});
            out["segment_ids"] = ToNumpy(std::move(b.segment_ids), {n, L});
            out["cu_seqlens"] = ToNumpy(std::move(b.cu_seqlens));
            out["max_seqlen"] = b.max_seqlen;
            out["documents"] = ToNumpy(std::move(b.row_documents));
            out["document_offsets"] = ToNumpy(std::move(b.row_document_offsets));
            return out;
          },
          "rows"_a, "The packed rows `rows` (int64 row numbers), filled in C++.");

  m.def(
      "gpt_indices",
      [](I32Array lengths, int64_t begin, int64_t end, int32_t seq_len, int64_t num_samples, uint32_t seed,
         bool add_extra_token) {
        GptIndexOptions o;
        o.seq_len = seq_len;
        o.num_samples = num_samples;
        o.seed = seed;
        o.add_extra_token = add_extra_token;
        Result<GptIndices> r = [&] {
          nb::gil_scoped_release release;
          return BuildGptIndices(std::span<const int32_t>(lengths.data(), lengths.shape(0)), begin, end, o);
        }();
        GptIndices g = ValueOrRaise(std::move(r));
        const size_t rows = g.sample_index.size() / 2;
        return nb::make_tuple(ToNumpy(std::move(g.document_index)), ToNumpy(std::move(g.sample_index), {rows, 2}),
                              ToNumpy(std::move(g.shuffle_index)));
      },
      "sequence_lengths"_a, "begin"_a, "end"_a, "seq_len"_a, "num_samples"_a, "seed"_a, "add_extra_token"_a = true,
      "(document_index, sample_index, shuffle_index) as megatron-core's GPTDataset builds them.");
  m.def(
      "blending_indices",
      [](const std::vector<double>& weights, int64_t size) {
        std::vector<int16_t> di;
        std::vector<int64_t> dsi;
        {
          nb::gil_scoped_release release;
          BuildBlendingIndices(weights, size, &di, &dsi);
        }
        return nb::make_tuple(ToNumpy(std::move(di)), ToNumpy(std::move(dsi)));
      },
      "weights"_a, "size"_a);
  m.def(
      "blend_dataset_index",
      [](const std::vector<double>& weights, int64_t num_samples) {
        std::vector<int16_t> di;
        {
          nb::gil_scoped_release release;
          BlendSizes b = PlanBlendSizes(weights, num_samples);
          BuildBlendingIndices(b.weights, b.size, &di, nullptr);
        }
        return ToNumpy(std::move(di));
      },
      "weights"_a, "num_samples"_a,
      "The dataset of each sample of the blend TokenSource builds for (weights, num_samples): "
      "megatron's BlendedDataset.dataset_index.");
  m.def(
      "megatron_summary",
      [](const std::string& prefix, const IoOptions& io) {
        Result<MegatronSummary> r = [&] {
          nb::gil_scoped_release release;  // a remote pair: two requests
          return ReadMegatronSummary(prefix, io);
        }();
        MegatronSummary s = ValueOrRaise(std::move(r));
        nb::dict d;
        d["dtype"] = std::string(DTypeName(s.dtype));
        d["sequences"] = s.sequences;
        d["documents"] = s.documents;
        d["idx_bytes"] = s.idx_bytes;
        d["bin_bytes"] = s.bin_bytes;
        return d;
      },
      "prefix"_a, "storage"_a,
      "dtype, sequences, documents, idx_bytes, bin_bytes of a pair, from the .idx header and the sizes.");
  m.def(
      "blend_sizes",
      [](const std::vector<double>& weights, int64_t size) {
        BlendSizes b = PlanBlendSizes(weights, size);
        return nb::make_tuple(b.weights, b.target, b.build, b.size);
      },
      "weights"_a, "size"_a);
  m.def(
      "numpy_shuffled_arange",
      [](int64_t n, uint32_t seed) {
        std::vector<int64_t> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[i] = i;
        NumpyRandomState rng(seed);
        rng.Shuffle(std::span<int64_t>(v));
        return ToNumpy(std::move(v));
      },
      "n"_a, "seed"_a, "numpy.random.RandomState(seed).shuffle(numpy.arange(n)), computed in C++.");
  m.def(
      "split_range",
      [](const std::string& split, int which, int64_t n) { return ValueOrRaise(SplitRange(split, which, n)); },
      "split"_a, "which"_a, "num_elements"_a);
}

}  // namespace stoker::python
