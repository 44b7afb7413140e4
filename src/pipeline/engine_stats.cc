// pipeline/engine_stats.cc — see engine_stats.h.
#include "pipeline/engine_stats.h"

#include <algorithm>

#include "pipeline/device_stage.h"
#include "pipeline/gpu_decode.h"
#include "pipeline/tune_config.h"
#include "pipeline/upscale_count.h"

namespace stoker {

EngineStats::EngineStats(const LoaderOptions& options, TuneConfig tune)
    : recorder_(options.record_stats ? std::make_unique<Recorder>(options.trace_spans) : nullptr), tune_config_(tune) {
  // Tuning reads the recorder's evidence: without recording, or with every
  // knob fixed, the settings stay as they start.
  const bool movable = std::any_of(tune.fixed.begin(), tune.fixed.end(), [](bool f) { return !f; });
  if (options.autotune && recorder_ && movable) tuner_.emplace(std::move(tune));
}

std::optional<TuneSettings> EngineStats::Tune(const std::function<uint64_t()>& run_cpu_ns, int token_batch) {
  if (!tuner_) return std::nullopt;
  std::vector<TuneChange> changes = tuner_->Observe(*recorder_, run_generation_, run_cpu_ns, token_batch);
  if (changes.empty()) return std::nullopt;
  changes_.insert(changes_.end(), changes.begin(), changes.end());
  return tuner_->settings();
}

std::vector<TuneChange> EngineStats::TakeTuneLog() {
  std::vector<TuneChange> out(changes_.begin() + static_cast<std::ptrdiff_t>(changes_taken_), changes_.end());
  changes_taken_ = changes_.size();
  return out;
}

RecorderSnapshot EngineStats::Snapshot(const EngineData& data) const {
  RecorderSnapshot s = recorder_ ? recorder_->Snapshot() : RecorderSnapshot{};
  if (data.device) data.device->Fill(&s);
  if (data.gpu) data.gpu->Fill(&s);
  return s;
}

std::string EngineStats::TraceJson() const {
  return recorder_ ? recorder_->TraceJson() : std::string("{\"traceEvents\":[]}");
}

LoaderSettings EngineStats::Settings(const EngineData& data) const {
  LoaderSettings s = ToLoaderSettings(tune_config_, data.tuned, data.options.autotune);
  s.cores = data.cpu.cores;
  s.cores_from = data.cpu.ToString();
  if (data.gpu) {
    RecorderSnapshot g;
    data.gpu->Fill(&g);
    s.gpu_decoder = g.gpu_decoder;
    s.gpu_share = g.gpu_share;
    s.gpu_share_why = g.gpu_share_why;
  } else {
    s.gpu_share_why = data.gpu_why_not;
  }
  FillUpscales(data.layout, data.upscales.get(), &s);
  return s;
}

Result<int64_t> StateInteger(const nlohmann::json& state, const char* key) {
  if (!state.contains(key) || !state[key].is_number_integer()) {
    return InvalidArgument(std::string("loader state lacks integer '") + key + "'");
  }
  return state[key].get<int64_t>();
}

Status CheckSavedWith(const nlohmann::json& state, std::initializer_list<std::pair<const char*, int64_t>> mine,
                      const std::string& consequence) {
  for (const auto& [key, value] : mine) {
    STOKER_ASSIGN_OR_RETURN(int64_t theirs, StateInteger(state, key));
    if (theirs != value) {
      return InvalidArgument(std::string("loader state was saved with ") + key + "=" + std::to_string(theirs) +
                             ", this loader has " + std::to_string(value) +
                             (consequence.empty() ? "" : ": " + consequence));
    }
  }
  return Status::Ok();
}

}  // namespace stoker
