// io/aws_credentials.cc — see aws_credentials.h. The refreshing provider
// (when to fetch, who waits) and the chain (which source applies); the
// fetches themselves are in io/aws_sources.cc.
#include "io/aws_credentials.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "io/aws_sources.h"
#include "io/s3.h"

namespace stoker {

namespace {

using SystemClock = std::chrono::system_clock;
using std::chrono::minutes;
using std::chrono::seconds;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

AwsCredentials EnvironmentKeys() {
  AwsCredentials c;
  c.key = Env("AWS_ACCESS_KEY_ID");
  c.secret = Env("AWS_SECRET_ACCESS_KEY");
  c.token = Env("AWS_SESSION_TOKEN");
  c.source = "environment (AWS_ACCESS_KEY_ID)";
  return c;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string When(SystemClock::time_point t) {
  std::time_t tt = SystemClock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Guards: mu_ guards every field below it; fetch_ runs outside it, by the one
// caller that set refreshing_.
class RefreshingProvider final : public CredentialProvider {
 public:
  RefreshingProvider(CredentialFetch fetch, WallClock clock, std::optional<AwsCredentials> first)
      : fetch_(std::move(fetch)), clock_(clock ? std::move(clock) : WallClock([] { return SystemClock::now(); })) {
    if (first) Accept(std::move(*first), clock_());
  }

  Result<AwsCredentials> Get() override {
    std::unique_lock lock(mu_);
    uint64_t waited_for = 0;  // the attempt this caller waited for, 0: none
    for (;;) {
      const auto now = clock_();
      const bool have = creds_.has_value() && !stale_;
      const bool valid = have && now < creds_->expires - margins_.mandatory;
      if (have && now < creds_->expires - margins_.advisory) return *creds_;
      if (refreshing_) {
        if (valid) return *creds_;  // someone fetches; these still serve
        waited_for = attempt_;
        cv_.wait(lock, [&] { return !refreshing_; });
        continue;
      }
      // Every caller that waited on a failed attempt gets its error: one
      // fetch per failure, not one per waiting thread.
      if (waited_for != 0 && waited_for == attempt_ && !last_error_.ok() && !valid) return last_error_;
      if (valid && now < retry_at_) return *creds_;
      refreshing_ = true;
      ++attempt_;
      lock.unlock();
      Result<AwsCredentials> got = fetch_();
      lock.lock();
      refreshing_ = false;
      cv_.notify_all();
      const auto after = clock_();
      if (got.ok() && got->expires <= after) {
        got = IoError(got->source + ": gave credentials that expired at " + When(got->expires));
      }
      if (got.ok()) {
        Accept(std::move(got).value(), after);
        return *creds_;
      }
      last_error_ = got.status();
      if (valid) {
        // Still good for a while: keep them, say so once, try again later.
        const auto left = creds_->expires - after;
        retry_at_ = after + std::clamp<SystemClock::duration>(left / 10, seconds(1), seconds(60));
        if (!warned_) {
          std::fprintf(stderr, "stoker: refreshing AWS credentials failed; the current ones (%s) serve until %s: %s\n",
                       creds_->source.c_str(), When(creds_->expires).c_str(), last_error_.message().c_str());
          warned_ = true;
        }
        return *creds_;
      }
      return last_error_;
    }
  }

  void Invalidate(const AwsCredentials& seen) override {
    std::lock_guard lock(mu_);
    if (creds_ && creds_->key == seen.key && creds_->token == seen.token) {
      stale_ = true;
      retry_at_ = {};
    }
  }

  int64_t fetches() const override {
    std::lock_guard lock(mu_);
    return fetches_;
  }

 private:
  void Accept(AwsCredentials c, SystemClock::time_point at) {  // REQUIRES(mu_) or the constructor
    margins_ = c.expires == SystemClock::time_point::max() ? RefreshMargins{} : MarginsFor(c.expires - at);
    creds_ = std::move(c);
    stale_ = false;
    retry_at_ = {};
    last_error_ = Status::Ok();
    warned_ = false;
    ++fetches_;
  }

  const CredentialFetch fetch_;
  const WallClock clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;               // refreshing_ went false
  std::optional<AwsCredentials> creds_;      // the current ones
  RefreshMargins margins_{};                 // for creds_
  bool stale_ = false;                       // Invalidate()d: fetch before use
  bool refreshing_ = false;                  // a caller is inside fetch_
  uint64_t attempt_ = 0;                     // fetch attempts so far
  Status last_error_;                        // of the last attempt
  SystemClock::time_point retry_at_{};       // after a failed refresh: not before
  bool warned_ = false;                      // that failure was logged
  int64_t fetches_ = 0;                      // successful fetches
};

std::shared_ptr<CredentialProvider> Constant(AwsCredentials c) {
  return NewRefreshingProvider([c] { return Result<AwsCredentials>(c); }, nullptr, c);
}

// ---- the shared config files ----

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct AwsFiles {
  std::string credentials_path, config_path;
  std::string credentials, config;  // their text ("" when absent)

  static AwsFiles Load() {
    AwsFiles f;
    f.credentials_path = Env("AWS_SHARED_CREDENTIALS_FILE");
    if (f.credentials_path.empty()) f.credentials_path = Env("HOME") + "/.aws/credentials";
    f.config_path = Env("AWS_CONFIG_FILE");
    if (f.config_path.empty()) f.config_path = Env("HOME") + "/.aws/config";
    f.credentials = ReadText(f.credentials_path);
    f.config = ReadText(f.config_path);
    return f;
  }

  // The profile's settings, the credentials file's winning over the config
  // file's (as botocore merges them); empty when neither has the profile.
  std::map<std::string, std::string> Profile(const std::string& name) const {
    auto merged = ReadAwsIniSection(config, "profile " + name);
    if (name == "default" && merged.empty()) merged = ReadAwsIniSection(config, "default");
    for (auto& [k, v] : ReadAwsIniSection(credentials, name)) merged[k] = v;
    return merged;
  }
};

struct ProfileChoice {
  std::string name;
  bool explicit_ = false;  // named by the settings or the environment
};

ProfileChoice ChooseProfile(const AwsSettings& s) {
  if (!s.profile.empty()) return {s.profile, true};
  for (const char* name : {"AWS_PROFILE", "AWS_DEFAULT_PROFILE"}) {
    if (std::string v = Env(name); !v.empty()) return {v, true};
  }
  return {"default", false};
}

std::string SessionName(const std::string& configured) {
  if (!configured.empty()) return configured;
  return "stoker-" + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         SystemClock::now().time_since_epoch()).count());
}

std::string ImdsEndpoint() {
  std::string e = Env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (e.empty()) e = "http://169.254.169.254";
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

int ImdsAttempts() {
  int n = std::atoi(Env("AWS_METADATA_SERVICE_NUM_ATTEMPTS").c_str());
  return n > 0 ? n : 1;
}

std::string ContainerUri() {
  std::string rel = Env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  if (!rel.empty()) return "http://169.254.170.2" + rel;
  return Env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
}

// As botocore: the authorization token goes over plain HTTP only to the
// container agent's addresses or this machine.
Status CheckContainerUri(const std::string& uri) {
  if (uri.starts_with("https://")) return Status::Ok();
  if (uri.starts_with("http://")) {
    std::string host = uri.substr(7, uri.find_first_of("/?#", 7) - 7);
    if (host.starts_with("[")) {
      host = host.substr(1, host.find(']') - 1);
    } else if (size_t colon = host.rfind(':'); colon != std::string::npos) {
      host = host.substr(0, colon);
    }
    if (host.starts_with("127.") || host == "localhost" || host == "::1" || host == "169.254.170.2" ||
        host == "169.254.170.23" || host == "fd00:ec2::23") {
      return Status::Ok();
    }
  }
  return InvalidArgument("AWS_CONTAINER_CREDENTIALS_FULL_URI '" + uri +
                         "': only https, a loopback address or the container agent's (169.254.170.2, "
                         "169.254.170.23, fd00:ec2::23) may receive the authorization token");
}

std::shared_ptr<CredentialProvider> ContainerProvider(const std::string& uri) {
  std::string token = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  std::string token_file = Env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  return NewRefreshingProvider([=] { return aws::FetchContainerCredentials(uri, token, token_file); });
}

std::shared_ptr<CredentialProvider> InstanceProvider(std::optional<AwsCredentials> first) {
  const std::string endpoint = ImdsEndpoint();
  const int attempts = std::max(3, ImdsAttempts());  // a refresh may retry; the probe does not
  return NewRefreshingProvider([=] { return aws::FetchInstanceCredentials(endpoint, attempts); }, nullptr,
                               std::move(first));
}

std::shared_ptr<CredentialProvider> WebIdentityProvider(aws::WebIdentityRole role, const std::string& region) {
  const std::string endpoint = aws::StsEndpoint(region);
  return NewRefreshingProvider([=] { return aws::AssumeRoleWithWebIdentity(endpoint, role); });
}

// Wraps a source's errors in "profile 'name': ".
std::shared_ptr<CredentialProvider> InProfile(const std::string& name, CredentialFetch fetch) {
  return NewRefreshingProvider([name, fetch = std::move(fetch)]() -> Result<AwsCredentials> {
    auto c = fetch();
    if (!c.ok()) return c.status().WithContext("AWS profile '" + name + "'");
    c->source = "profile '" + name + "': " + c->source;
    return c;
  });
}

// The profile's own keys, or null.
std::optional<AwsCredentials> StaticKeys(const std::map<std::string, std::string>& p, const std::string& name) {
  auto key = p.find("aws_access_key_id"), secret = p.find("aws_secret_access_key");
  if (key == p.end() || secret == p.end() || key->second.empty() || secret->second.empty()) return std::nullopt;
  AwsCredentials c;
  c.key = key->second;
  c.secret = secret->second;
  if (auto t = p.find("aws_session_token"); t != p.end()) c.token = t->second;
  c.source = "profile '" + name + "' keys";
  return c;
}

// A profile's provider: role_arn (with its source), credential_process,
// static keys; null when the profile has none of them. depth bounds
// source_profile chains (and cycles).
Result<std::shared_ptr<CredentialProvider>> ProfileProvider(const AwsFiles& files, const std::string& name,
                                                            const std::string& region, int depth) {
  const auto p = files.Profile(name);
  auto get = [&](const char* key) -> std::string {
    auto it = p.find(key);
    return it == p.end() ? "" : it->second;
  };
  const std::string where = "AWS profile '" + name + "' (" + files.config_path + ", " + files.credentials_path + ")";
  if (depth > 8) return InvalidArgument(where + ": source_profile chain too long or circular");
  if (std::string role_arn = get("role_arn"); !role_arn.empty()) {
    if (!get("mfa_serial").empty()) return InvalidArgument(where + ": mfa_serial is not supported (no prompt here)");
    aws::AssumedRole role;
    role.role_arn = role_arn;
    role.session_name = SessionName(get("role_session_name"));
    role.external_id = get("external_id");
    role.duration_s = std::atoi(get("duration_seconds").c_str());
    const std::string endpoint = aws::StsEndpoint(region);
    std::shared_ptr<CredentialProvider> source;
    if (std::string sp = get("source_profile"); !sp.empty()) {
      if (sp == name) {
        auto keys = StaticKeys(p, name);
        if (!keys) return InvalidArgument(where + ": source_profile is itself but it has no keys");
        source = Constant(*keys);
      } else {
        auto s = ProfileProvider(files, sp, region, depth + 1);
        if (!s.ok()) return s.status().WithContext(where);
        if (!*s) return InvalidArgument(where + ": its source_profile '" + sp + "' has no credentials");
        source = *s;
      }
    } else if (std::string cs = get("credential_source"); !cs.empty()) {
      if (cs == "Environment") {
        AwsCredentials c = EnvironmentKeys();
        if (c.key.empty() || c.secret.empty()) {
          return InvalidArgument(where + ": credential_source Environment, but AWS_ACCESS_KEY_ID or "
                                 "AWS_SECRET_ACCESS_KEY is unset");
        }
        source = Constant(c);
      } else if (cs == "Ec2InstanceMetadata") {
        source = InstanceProvider(std::nullopt);
      } else if (cs == "EcsContainer") {
        std::string uri = ContainerUri();
        if (uri.empty()) {
          return InvalidArgument(where + ": credential_source EcsContainer, but no AWS_CONTAINER_CREDENTIALS_*_URI");
        }
        STOKER_RETURN_IF_ERROR(CheckContainerUri(uri).WithContext(where));
        source = ContainerProvider(uri);
      } else {
        return InvalidArgument(where + ": unknown credential_source '" + cs + "'");
      }
    } else if (std::string wif = get("web_identity_token_file"); !wif.empty()) {
      aws::WebIdentityRole w{role_arn, role.session_name, wif, role.duration_s};
      return InProfile(name, [=] { return aws::AssumeRoleWithWebIdentity(endpoint, w); });
    } else {
      return InvalidArgument(where + ": role_arn without source_profile, credential_source or web_identity_token_file");
    }
    return InProfile(name, [=]() -> Result<AwsCredentials> {
      STOKER_ASSIGN_OR_RETURN(AwsCredentials src, source->Get());
      return aws::AssumeRole(endpoint, region, role, src);
    });
  }
  if (std::string cmd = get("credential_process"); !cmd.empty()) {
    return InProfile(name, [cmd] { return aws::RunCredentialProcess(cmd); });
  }
  if (auto keys = StaticKeys(p, name)) return Constant(*keys);
  if (p.count("aws_access_key_id") || p.count("aws_secret_access_key")) {
    return InvalidArgument(where + ": only one of aws_access_key_id and aws_secret_access_key is set");
  }
  return std::shared_ptr<CredentialProvider>();
}

// The chain of aws_credentials.h, in order; null: no source.
Result<std::shared_ptr<CredentialProvider>> Resolve(const AwsSettings& settings) {
  // 1. environment, unless the settings name a profile (botocore drops its
  // environment provider for a profile given to the session)
  const AwsCredentials env = EnvironmentKeys();
  const bool use_env = settings.profile.empty();
  if (use_env && !env.key.empty() && !env.secret.empty()) return Constant(env);
  if (use_env && (!env.key.empty() || !env.secret.empty())) {
    return InvalidArgument(
        "AWS credentials in the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set");
  }
  const std::string region = ResolveAwsRegion(settings);
  // 2. the profile
  const ProfileChoice profile = ChooseProfile(settings);
  const AwsFiles files = AwsFiles::Load();
  STOKER_ASSIGN_OR_RETURN(auto from_profile, ProfileProvider(files, profile.name, region, 0));
  if (from_profile) return from_profile;
  if (profile.explicit_ && files.Profile(profile.name).empty()) {
    return NotFound("AWS profile '" + profile.name + "' is in neither " + files.config_path + " nor " +
                    files.credentials_path);
  }
  // 3. web identity
  if (std::string file = Env("AWS_WEB_IDENTITY_TOKEN_FILE"); !file.empty()) {
    std::string arn = Env("AWS_ROLE_ARN");
    if (arn.empty()) return InvalidArgument("AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not");
    return WebIdentityProvider({arn, SessionName(Env("AWS_ROLE_SESSION_NAME")), file, 0}, region);
  }
  // 4. container
  if (std::string uri = ContainerUri(); !uri.empty()) {
    STOKER_RETURN_IF_ERROR(CheckContainerUri(uri));
    return ContainerProvider(uri);
  }
  // 5. EC2 instance metadata: a probe; nothing there is "no source"
  if (Lower(Env("AWS_EC2_METADATA_DISABLED")) == "true") return std::shared_ptr<CredentialProvider>();
  // (as botocore, whatever went wrong: a firewall or proxy may answer for
  // 169.254.169.254; an odd answer is worth one line, not a failed run).
  auto first = aws::FetchInstanceCredentials(ImdsEndpoint(), ImdsAttempts());
  if (first.ok()) return InstanceProvider(std::move(first).value());
  if (first.status().code() != StatusCode::kNotFound) {
    std::fprintf(stderr, "stoker: no AWS credentials found, requests go unsigned (%s)\n",
                 first.status().message().c_str());
  }
  return std::shared_ptr<CredentialProvider>();
}

// What the chain reads besides the settings: a change resolves anew.
std::string EnvironmentKey() {
  static const char* const kNames[] = {
      "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
      "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "HOME", "AWS_REGION", "AWS_DEFAULT_REGION",
      "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
      "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
      "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_DISABLED",
      "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_METADATA_SERVICE_NUM_ATTEMPTS", "AWS_ENDPOINT_URL_STS",
      "AWS_ENDPOINT_URL"};
  std::string key;
  for (const char* name : kNames) {
    const char* v = std::getenv(name);
    key += v ? "=" + std::string(v) : "-";
    key += '\n';
  }
  return key;
}

}  // namespace

RefreshMargins MarginsFor(SystemClock::duration lifetime) {
  if (lifetime < SystemClock::duration::zero()) lifetime = SystemClock::duration::zero();
  return {std::min<SystemClock::duration>(minutes(15), lifetime / 4),
          std::min<SystemClock::duration>(minutes(10), lifetime / 8)};
}

std::shared_ptr<CredentialProvider> NewRefreshingProvider(CredentialFetch fetch, WallClock clock,
                                                          std::optional<AwsCredentials> first) {
  return std::make_shared<RefreshingProvider>(std::move(fetch), std::move(clock), std::move(first));
}

Result<std::shared_ptr<CredentialProvider>> SharedCredentialChain(const AwsSettings& settings) {
  static std::mutex mu;  // guards chains; held while resolving, so each key is resolved (and IMDS probed) once
  static std::map<std::string, std::shared_ptr<CredentialProvider>> chains;
  const std::string key = settings.profile + '\n' + settings.region + '\n' + EnvironmentKey();
  std::lock_guard lock(mu);
  if (auto it = chains.find(key); it != chains.end()) return it->second;
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<CredentialProvider> p, Resolve(settings));
  if (p) {
    // A configured source that cannot deliver is an error now, not a 403 later.
    auto first = p->Get();
    if (!first.ok()) return first.status();
  }
  chains.emplace(key, p);
  return p;
}

std::string ResolveAwsRegion(const AwsSettings& settings) {
  if (!settings.region.empty()) return settings.region;
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    if (std::string v = Env(name); !v.empty()) return v;
  }
  auto p = AwsFiles::Load().Profile(ChooseProfile(settings).name);
  if (auto it = p.find("region"); it != p.end() && !it->second.empty()) return it->second;
  return "us-east-1";
}

}  // namespace stoker
