// io/aws_sources.cc — see aws_sources.h.
#include "io/aws_sources.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

namespace stoker::aws {

namespace {

using SystemClock = std::chrono::system_clock;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// ---- HTTP: one short exchange with a credential endpoint ----

struct HttpCall {
  std::string method = "GET";
  std::string url;
  std::string body;  // POST form
  std::vector<std::string> headers;
  std::string sigv4, userpwd;  // "aws:amz:<region>:sts", "key:secret"
  long connect_ms = 1000, total_ms = 2000;
  int attempts = 1;
};

struct HttpAnswer {
  long code = 0;
  std::string body;
};

struct CurlDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};

size_t Append(char* buf, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(buf, size * n);
  return size * n;
}

// Sends the call; connection errors, timeouts and 5xx are tried again (up to
// call.attempts, 100 ms doubling between). The last answer whatever its code,
// or the transport's error as IoError.
Result<HttpAnswer> Send(const HttpCall& call) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::string last;
  for (int attempt = 1;; ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(attempt - 2, 4)));
    std::unique_ptr<CURL, CurlDeleter> h(curl_easy_init());
    if (!h) return Internal("curl_easy_init failed");
    HttpAnswer answer;
    curl_slist* headers = nullptr;
    for (const auto& line : call.headers) headers = curl_slist_append(headers, line.c_str());
    curl_easy_setopt(h.get(), CURLOPT_URL, call.url.c_str());
    curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h.get(), CURLOPT_CONNECTTIMEOUT_MS, call.connect_ms);
    curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS, call.total_ms);
    curl_easy_setopt(h.get(), CURLOPT_NOPROXY, "169.254.169.254,169.254.170.2,localhost,127.0.0.1");
    if (call.method == "POST") {
      curl_easy_setopt(h.get(), CURLOPT_POSTFIELDS, call.body.c_str());
      curl_easy_setopt(h.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(call.body.size()));
    } else if (call.method != "GET") {
      curl_easy_setopt(h.get(), CURLOPT_CUSTOMREQUEST, call.method.c_str());
    }
    if (headers) curl_easy_setopt(h.get(), CURLOPT_HTTPHEADER, headers);
    if (!call.sigv4.empty()) {
      curl_easy_setopt(h.get(), CURLOPT_AWS_SIGV4, call.sigv4.c_str());
      curl_easy_setopt(h.get(), CURLOPT_USERPWD, call.userpwd.c_str());
    }
    curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, Append);
    curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &answer.body);
    CURLcode rc = curl_easy_perform(h.get());
    curl_slist_free_all(headers);
    if (rc == CURLE_OK) {
      curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &answer.code);
      if (answer.code < 500 || attempt >= call.attempts) return answer;
      last = "HTTP " + std::to_string(answer.code);
    } else {
      last = curl_easy_strerror(rc);
      if (attempt >= call.attempts) {
        return IoError(call.method + " " + call.url + ": " + last + " (" + std::to_string(attempt) + " attempts)");
      }
    }
  }
}

std::string FormEscape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      out += {'%', kHex[ch >> 4], kHex[ch & 15]};
    }
  }
  return out;
}

// ---- XML: the few elements of an STS answer ----

std::string XmlUnescape(std::string s) {
  static const std::pair<const char*, const char*> kRep[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (auto [from, to] : kRep) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += std::strlen(to)) {
      s.replace(p, std::strlen(from), to);
    }
  }
  return s;
}

// The text of the first <tag>...</tag> inside doc (whitespace trimmed), or "".
std::string XmlText(std::string_view doc, const std::string& tag) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  size_t p = doc.find(open);
  if (p == std::string_view::npos) return "";
  size_t e = doc.find(close, p);
  if (e == std::string_view::npos) return "";
  std::string_view v = doc.substr(p + open.size(), e - p - open.size());
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  return XmlUnescape(std::string(v));
}

std::string Clip(std::string s, size_t n = 300) {
  if (s.size() > n) s = s.substr(0, n) + "...";
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

// A non-2xx answer as a message: STS's (or S3's) Code and Message when there.
std::string DescribeRefusal(const HttpAnswer& a) {
  std::string code = XmlText(a.body, "Code"), message = XmlText(a.body, "Message");
  std::string out = "HTTP " + std::to_string(a.code);
  if (!code.empty()) out += " " + code;
  if (!message.empty()) out += ": " + message;
  if (code.empty() && message.empty() && !a.body.empty()) out += ": " + Clip(a.body);
  return out;
}

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TrimSpace(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

Result<AwsCredentials> CallSts(const std::string& endpoint, HttpCall call, const std::string& action) {
  call.method = "POST";
  call.url = endpoint;
  call.headers.push_back("Content-Type: application/x-www-form-urlencoded; charset=utf-8");
  call.headers.push_back("Accept: application/xml");
  call.connect_ms = 3000;
  call.total_ms = 10000;
  call.attempts = 3;
  STOKER_ASSIGN_OR_RETURN(HttpAnswer a, Send(call));
  if (a.code != 200) return IoError("STS " + action + " at " + endpoint + ": " + DescribeRefusal(a));
  auto creds = ParseStsResponse(a.body);
  if (!creds.ok()) return creds.status().WithContext("STS " + action + " at " + endpoint);
  return creds;
}

Result<AwsCredentials> FromJson(const nlohmann::json& j, const char* token_field, const std::string& what) {
  AwsCredentials c;
  auto text = [&](const char* field) -> std::string {
    auto it = j.find(field);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
  };
  c.key = text("AccessKeyId");
  c.secret = text("SecretAccessKey");
  c.token = text(token_field);
  if (c.key.empty() || c.secret.empty()) return DataLoss(what + " without AccessKeyId and SecretAccessKey");
  if (std::string exp = text("Expiration"); !exp.empty()) {
    STOKER_ASSIGN_OR_RETURN(c.expires, ParseIso8601(exp));
  }
  return c;
}

Result<nlohmann::json> ParseJsonObject(const std::string& text, const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return DataLoss(what + " is not a JSON object: '" + Clip(text, 120) + "'");
  return j;
}

}  // namespace

Result<SystemClock::time_point> ParseIso8601(std::string_view text) {
  std::string s(text);
  int y, mo, d, h, mi, sec, used = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6 || used != 19) {
    return DataLoss("not an ISO-8601 time: '" + s + "'");
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  const std::time_t tt = timegm(&tm);
  // Past the clock's range (2262 for nanoseconds): as good as never.
  if (tt >= SystemClock::to_time_t(SystemClock::time_point::max()) - 2 * 86400) return SystemClock::time_point::max();
  auto t = SystemClock::from_time_t(tt);
  size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    double scale = 0.1, frac = 0;
    for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, scale /= 10) {
      frac += (s[i] - '0') * scale;
    }
    t += std::chrono::duration_cast<SystemClock::duration>(std::chrono::duration<double>(frac));
  }
  if (i == s.size() || s.substr(i) == "Z" || s.substr(i) == "z") return t;
  int oh, om;
  if ((s[i] == '+' || s[i] == '-') && std::sscanf(s.c_str() + i + 1, "%2d:%2d", &oh, &om) == 2 && s.size() == i + 6) {
    auto offset = std::chrono::hours(oh) + std::chrono::minutes(om);
    return s[i] == '+' ? t - offset : t + offset;
  }
  return DataLoss("not an ISO-8601 time: '" + s + "'");
}

Result<AwsCredentials> ParseStsResponse(const std::string& xml) {
  if (xml.find("<ErrorResponse") != std::string::npos || xml.find("<Error>") != std::string::npos) {
    return IoError(XmlText(xml, "Code") + ": " + XmlText(xml, "Message"));
  }
  size_t at = xml.find("<Credentials>");
  if (at == std::string::npos) return DataLoss("STS answer without Credentials: '" + Clip(xml, 200) + "'");
  std::string_view block = std::string_view(xml).substr(at);
  AwsCredentials c;
  c.key = XmlText(block, "AccessKeyId");
  c.secret = XmlText(block, "SecretAccessKey");
  c.token = XmlText(block, "SessionToken");
  if (c.key.empty() || c.secret.empty()) return DataLoss("STS Credentials without AccessKeyId and SecretAccessKey");
  std::string exp = XmlText(block, "Expiration");
  if (exp.empty()) return DataLoss("STS Credentials without an Expiration");
  STOKER_ASSIGN_OR_RETURN(c.expires, ParseIso8601(exp));
  return c;
}

Result<AwsCredentials> ParseMetadataJson(const std::string& json) {
  STOKER_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonObject(json, "the credentials document"));
  if (auto code = j.find("Code"); code != j.end() && code->is_string() && *code != "Success") {
    std::string message = j.value("Message", std::string());
    return IoError("the endpoint answered Code " + code->get<std::string>() + (message.empty() ? "" : ": " + message));
  }
  return FromJson(j, "Token", "the credentials document");
}

Result<AwsCredentials> ParseProcessJson(const std::string& json) {
  STOKER_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonObject(json, "its output"));
  auto v = j.find("Version");
  if (v == j.end() || !v->is_number_integer() || v->get<int>() != 1) {
    return DataLoss("its output has no \"Version\": 1 (the only version defined)");
  }
  return FromJson(j, "SessionToken", "its output");
}

std::string StsEndpoint(const std::string& region) {
  for (const char* name : {"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"}) {
    std::string v = Env(name);
    if (!v.empty()) return v;
  }
  return "https://sts." + region + ".amazonaws.com" + (region.starts_with("cn-") ? ".cn" : "");
}

Result<AwsCredentials> AssumeRoleWithWebIdentity(const std::string& sts_endpoint, const WebIdentityRole& role) {
  const std::string what = "web identity (role " + role.role_arn + ", token file " + role.token_file + ")";
  auto token = ReadFile(role.token_file, "the web identity token file");
  if (!token.ok()) return token.status().WithContext(what);
  HttpCall call;
  call.body = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + FormEscape(role.role_arn) +
              "&RoleSessionName=" + FormEscape(role.session_name) +
              "&WebIdentityToken=" + FormEscape(TrimSpace(*token));
  if (role.duration_s > 0) call.body += "&DurationSeconds=" + std::to_string(role.duration_s);
  auto c = CallSts(sts_endpoint, std::move(call), "AssumeRoleWithWebIdentity");
  if (!c.ok()) return c.status().WithContext(what);
  c->source = what;
  return c;
}

Result<AwsCredentials> AssumeRole(const std::string& sts_endpoint, const std::string& region, const AssumedRole& role,
                                  const AwsCredentials& source) {
  HttpCall call;
  call.body = "Action=AssumeRole&Version=2011-06-15&RoleArn=" + FormEscape(role.role_arn) +
              "&RoleSessionName=" + FormEscape(role.session_name);
  if (!role.external_id.empty()) call.body += "&ExternalId=" + FormEscape(role.external_id);
  if (role.duration_s > 0) call.body += "&DurationSeconds=" + std::to_string(role.duration_s);
  call.sigv4 = "aws:amz:" + region + ":sts";
  call.userpwd = source.key + ":" + source.secret;
  if (!source.token.empty()) call.headers.push_back("x-amz-security-token: " + source.token);
  auto c = CallSts(sts_endpoint, std::move(call), "AssumeRole");
  if (!c.ok()) return c.status().WithContext("AssumeRole of " + role.role_arn + " with " + source.source);
  c->source = "role " + role.role_arn + " assumed with " + source.source;
  return c;
}

Result<AwsCredentials> FetchContainerCredentials(const std::string& uri, const std::string& token,
                                                 const std::string& token_file) {
  const std::string what = "container credentials (" + uri + ")";
  HttpCall call;
  call.url = uri;
  call.attempts = 3;
  call.headers.push_back("Accept: application/json");
  std::string auth = token;
  if (!token_file.empty()) {
    auto t = ReadFile(token_file, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    if (!t.ok()) return t.status().WithContext(what);
    auth = TrimSpace(*t);
  }
  if (auth.find_first_of("\r\n") != std::string::npos) return InvalidArgument(what + ": the token holds a line break");
  if (!auth.empty()) call.headers.push_back("Authorization: " + auth);
  auto a = Send(call);
  if (!a.ok()) return a.status().WithContext(what);
  if (a->code != 200) return IoError(what + ": " + DescribeRefusal(*a));
  auto c = ParseMetadataJson(a->body);
  if (!c.ok()) return c.status().WithContext(what);
  c->source = what;
  return c;
}

Result<AwsCredentials> FetchInstanceCredentials(const std::string& endpoint, int attempts) {
  const std::string what = "EC2 instance metadata (" + endpoint + ")";
  HttpCall put;
  put.method = "PUT";
  put.url = endpoint + "/latest/api/token";
  put.attempts = attempts;
  put.headers.push_back("X-aws-ec2-metadata-token-ttl-seconds: 21600");
  auto token = Send(put);
  if (!token.ok()) return NotFound(what + ": nothing answers: " + token.status().message());
  std::string token_header;
  if (token->code == 200) {
    token_header = "X-aws-ec2-metadata-token: " + TrimSpace(token->body);
  } else if (token->code != 403 && token->code != 404 && token->code != 405) {
    // 403/404/405: IMDSv1 only (botocore goes on without a token); else a fault.
    return IoError(what + ": token PUT: " + DescribeRefusal(*token));
  }
  HttpCall get;
  get.attempts = attempts;
  if (!token_header.empty()) get.headers.push_back(token_header);
  get.url = endpoint + "/latest/meta-data/iam/security-credentials/";
  auto role = Send(get);
  if (!role.ok()) return role.status().WithContext(what);
  if (role->code == 404) return NotFound(what + ": the instance has no IAM role");
  if (role->code != 200) return IoError(what + ": role name: " + DescribeRefusal(*role));
  std::string name = TrimSpace(role->body.substr(0, role->body.find('\n')));
  if (name.empty()) return NotFound(what + ": the instance has no IAM role");
  get.url += name;
  auto doc = Send(get);
  if (!doc.ok()) return doc.status().WithContext(what + ", role " + name);
  if (doc->code != 200) return IoError(what + ", role " + name + ": " + DescribeRefusal(*doc));
  auto c = ParseMetadataJson(doc->body);
  if (!c.ok()) return c.status().WithContext(what + ", role " + name);
  c->source = "EC2 instance metadata (role " + name + ")";
  return c;
}

Result<AwsCredentials> RunCredentialProcess(const std::string& command) {
  const std::string what = "credential_process '" + command + "'";
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return IoError(what + ": pipe: " + std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]), close(out[1]);
    return IoError(what + ": pipe: " + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return IoError(what + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    dup2(out[1], 1);
    dup2(err[1], 2);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  std::string stdout_text, stderr_text;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&stdout_text, &stderr_text};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        if (sinks[i]->size() < (1u << 20)) sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    std::string how = WIFEXITED(wstatus) ? "exit status " + std::to_string(WEXITSTATUS(wstatus))
                                         : "signal " + std::to_string(WTERMSIG(wstatus));
    return IoError(what + " failed (" + how + ")" + (stderr_text.empty() ? "" : ": " + Clip(TrimSpace(stderr_text))));
  }
  auto c = ParseProcessJson(stdout_text);
  if (!c.ok()) return c.status().WithContext(what);
  c->source = what;
  return c;
}

}  // namespace stoker::aws
