#include "ctld/client/ctld_client.h"

#include "ctld/client/http.h"

namespace goldminer {

std::string view_credential_payload(const std::string& path) { return "goldminer-ctld GET " + path; }

CtldClient::CtldClient(std::string address, std::shared_ptr<CredentialService> credentials, uid_t ctld_uid,
                       double timeout_s)
    : address_(std::move(address)),
      credentials_(std::move(credentials)),
      ctld_uid_(ctld_uid),
      timeout_s_(timeout_s),
      nonces_(std::random_device{}()) {}

Expected<int> CtldClient::report(SessionReport report) {
  report.nonce = nonces_();
  auto sealed = credentials_->encode(encode_report(report), nullptr);
  if (!sealed.ok()) return sealed.status();
  auto response = http_call(address_, HttpRequest{"POST", "/report", *sealed}, timeout_s_);
  if (!response.ok()) return response.status();
  std::string body = response->body;
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  if (response->status != 200) return Status::error(address_ + " answered " + std::to_string(response->status) + ": " + body);
  auto verified = credentials_->decode(body);
  if (!verified.ok()) return Status::error(address_ + ": answer refused: " + verified.status().message());
  if (verified->uid != 0 && verified->uid != ctld_uid_)
    return Status::error(address_ + ": answer refused: made by uid " + std::to_string(verified->uid) +
                         ", not goldminer-ctld's (uid " + std::to_string(ctld_uid_) + ")");
  auto answer = decode_answer(verified->payload);
  if (!answer.ok()) return Status::error(address_ + ": " + answer.status().message());
  if (answer->job_id != report.job_id || answer->nonce != report.nonce)
    return Status::error(address_ + ": answer refused: it answers another report");
  return answer->target;
}

}  // namespace goldminer
