// device/hardware_batcher.cc — see hardware_batcher.h.
#include "device/hardware_batcher.h"

#include <stdio.h>

#include <algorithm>

namespace stoker {

namespace {

constexpr double kSmooth = 0.3;  // weight of the newest batch in the expected time

}  // namespace

HardwareBatcher::HardwareBatcher(Run run, HardwareBatcherOptions options)
    : run_(std::move(run)), options_(std::move(options)), s_per_image_(options_.prior_s_per_image),
      worker_([this] { Work(); }) {}

HardwareBatcher::~HardwareBatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    work_cv_.notify_all();
  }
  worker_.join();
}

std::string HardwareBatcher::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

size_t HardwareBatcher::queued_images() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& r : queue_) n += r->images.size() - r->next;
  return n;
}

void HardwareBatcher::Work() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || dead_ || !queue_.empty(); });
    if (dead_ || queue_.empty()) return;  // stopped with nothing queued, or given up on
    // One hardware batch from the queue's front: as many whole units as are
    // queued, up to max_batch; fewer than a unit go as they are (no wait
    // for more: a decode thread is waiting on them).
    size_t queued = 0;
    for (const auto& r : queue_) queued += r->images.size() - r->next;
    const size_t unit = static_cast<size_t>(std::max(1, options_.unit));
    size_t n = std::min(queued, static_cast<size_t>(std::max(options_.max_batch, options_.unit)));
    if (n >= unit) n = n / unit * unit;
    std::vector<HardwareImage> batch;
    batch.reserve(n);
    running_.clear();
    while (batch.size() < n) {
      std::shared_ptr<Request> r = queue_.front();
      const size_t k = std::min(r->images.size() - r->next, n - batch.size());
      batch.insert(batch.end(), r->images.begin() + static_cast<std::ptrdiff_t>(r->next),
                   r->images.begin() + static_cast<std::ptrdiff_t>(r->next + k));
      r->next += k;
      running_.push_back(r);
      if (r->next == r->images.size()) queue_.pop_front();
    }
    busy_ = true;
    busy_images_ = n;
    busy_since_ = Clock::now();
    bound_s_ = std::max(options_.min_bound_s, options_.bound_factor * static_cast<double>(n) * s_per_image_);
    if (!returned_any_) bound_s_ = std::max(bound_s_, options_.first_bound_s);
    done_cv_.notify_all();  // waiters now time this batch
    lock.unlock();
    Status st = run_(batch);
    lock.lock();
    busy_ = false;
    if (dead_) return;  // the watchdog gave up on this batch and answered its requests
    batches_.fetch_add(1, std::memory_order_relaxed);
    returned_any_ = true;
    const double s = std::chrono::duration<double>(Clock::now() - busy_since_).count() / static_cast<double>(n);
    if (st.ok()) s_per_image_ = (1 - kSmooth) * s_per_image_ + kSmooth * s;
    // Each request's share of the batch: counted against its images in order.
    size_t left = n;
    for (const std::shared_ptr<Request>& r : running_) {
      const size_t in_flight = r->next - r->done;
      const size_t k = std::min(in_flight, left);
      r->done += k;
      left -= k;
      if (!st.ok() && !r->failed) {
        r->failed = true;
        r->error = st;
      }
    }
    running_.clear();
    done_cv_.notify_all();
  }
}

void HardwareBatcher::MarkDead() {
  const double waited = std::chrono::duration<double>(Clock::now() - busy_since_).count();
  char line[320];
  snprintf(line, sizeof line,
           "%s: a hardware batch of %zu images did not return within %.1f s (expected %.3f s): the hardware "
           "decoder is off for this process; its images and every later one decode on the CPU",
           options_.name.c_str(), busy_images_, waited, static_cast<double>(busy_images_) * s_per_image_);
  failure_ = line;
  dead_ = true;
  dead_flag_.store(true, std::memory_order_release);
  fprintf(stderr, "stoker: %s\n", line);
  for (const std::shared_ptr<Request>& r : running_) r->abandoned = true;
  running_.clear();
  for (const std::shared_ptr<Request>& r : queue_) r->dead = true;
  queue_.clear();
  done_cv_.notify_all();
  work_cv_.notify_all();
}

HardwareBatcher::Outcome HardwareBatcher::Decode(std::span<const HardwareImage> images, Status* error) {
  if (images.empty()) return Outcome::kDecoded;
  auto req = std::make_shared<Request>();
  req->images.assign(images.begin(), images.end());
  std::unique_lock lock(mu_);
  if (dead_) return Outcome::kDead;
  queue_.push_back(req);
  work_cv_.notify_one();
  while (req->done < req->images.size() && !req->dead && !req->abandoned) {
    if (dead_) {  // answered by MarkDead: flags set above; defensive
      req->dead = true;
      break;
    }
    if (!busy_) {
      done_cv_.wait(lock);  // the worker is about to take it (it notifies when a batch begins)
      continue;
    }
    const auto deadline = busy_since_ + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(bound_s_));
    if (Clock::now() >= deadline) {
      MarkDead();
      break;
    }
    done_cv_.wait_until(lock, deadline);
  }
  if (req->abandoned) return Outcome::kAbandoned;
  if (req->dead) return Outcome::kDead;
  if (req->failed) {
    if (error) *error = req->error;
    return Outcome::kFailed;
  }
  return Outcome::kDecoded;
}

}  // namespace stoker
