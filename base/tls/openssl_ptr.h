// OpenSSL objects owned by std::unique_ptr: OpenSslPtr<T, T_free> frees with the library's own
// function, so every exit path releases what it made. The common ones are named.
//
// Thread safety: as std::unique_ptr.
#pragma once

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>

#include <memory>

namespace gpupool::tls {

template <typename T, void (*Free)(T*)>
struct OpenSslDeleter {
  void operator()(T* p) const { Free(p); }
};
template <typename T, void (*Free)(T*)>
using OpenSslPtr = std::unique_ptr<T, OpenSslDeleter<T, Free>>;

using Pkey = OpenSslPtr<EVP_PKEY, EVP_PKEY_free>;
using PkeyCtx = OpenSslPtr<EVP_PKEY_CTX, EVP_PKEY_CTX_free>;
using Bio = OpenSslPtr<BIO, BIO_free_all>;
using Bignum = OpenSslPtr<BIGNUM, BN_free>;

}  // namespace gpupool::tls
