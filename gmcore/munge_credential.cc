// The one file that includes munge.h (gmcore/credential.h).
#include <munge.h>

#include <cstdlib>

#include "gmcore/credential.h"

namespace goldminer {
namespace {

class MungeCredentials : public CredentialService {
 public:
  explicit MungeCredentials(std::string socket) : socket_(std::move(socket)) {}

  Expected<std::string> encode(const std::string& payload, const uid_t* for_uid) override {
    auto ctx = context();
    if (!ctx.ok()) return ctx.status();
    munge_ctx_t c = ctx->get();
    if (for_uid != nullptr) {
      munge_err_t e = munge_ctx_set(c, MUNGE_OPT_UID_RESTRICTION, *for_uid);
      if (e != EMUNGE_SUCCESS) return failed("cannot restrict a credential to uid " + std::to_string(*for_uid), e, c);
    }
    char* cred = nullptr;
    munge_err_t e = munge_encode(&cred, c, payload.data(), static_cast<int>(payload.size()));
    if (e != EMUNGE_SUCCESS) return failed("cannot make a credential", e, c);
    std::string out(cred);
    std::free(cred);
    return out;
  }

  Expected<Verified> decode(const std::string& credential) override {
    auto ctx = context();
    if (!ctx.ok()) return ctx.status();
    munge_ctx_t c = ctx->get();
    void* buf = nullptr;
    int len = 0;
    Verified v;
    munge_err_t e = munge_decode(credential.c_str(), c, &buf, &len, &v.uid, &v.gid);
    if (buf != nullptr) {
      v.payload.assign(static_cast<const char*>(buf), static_cast<size_t>(len));
      std::free(buf);
    }
    if (e != EMUNGE_SUCCESS) return failed("credential refused", e, c);
    time_t encoded = 0;
    if (munge_ctx_get(c, MUNGE_OPT_ENCODE_TIME, &encoded) == EMUNGE_SUCCESS) v.encoded = encoded;
    return v;
  }

 private:
  struct Free {
    void operator()(munge_ctx_t c) const { munge_ctx_destroy(c); }
  };
  using Ctx = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, Free>;

  // A context per call: libmunge contexts are not thread-safe.
  Expected<Ctx> context() const {
    Ctx c(munge_ctx_create());
    if (!c) return Status::error("munge: cannot create a context (out of memory)");
    if (!socket_.empty()) {
      munge_err_t e = munge_ctx_set(c.get(), MUNGE_OPT_SOCKET, socket_.c_str());
      if (e != EMUNGE_SUCCESS) return failed("cannot use socket " + socket_, e, c.get());
    }
    return c;
  }

  static Status failed(const std::string& what, munge_err_t e, munge_ctx_t c) {
    const char* detail = c != nullptr ? munge_ctx_strerror(c) : nullptr;
    return Status::error("munge: " + what + ": " + (detail != nullptr ? detail : munge_strerror(e)));
  }

  const std::string socket_;
};

}  // namespace

std::unique_ptr<CredentialService> munge_credentials(const std::string& socket) {
  return std::make_unique<MungeCredentials>(socket);
}

}  // namespace goldminer
