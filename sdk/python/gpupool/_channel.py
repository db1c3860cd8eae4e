"""How a Settings becomes a gRPC channel and call metadata, the same way for both clients.

- Several replicas ("a:7070,b:7070", docs/ha.md) are one gRPC target, "ipv4:a:7070,b:7070";
  gRPC's pick_first connects to the first that accepts. A certificate is checked against one
  host name and a list is none, so gpupoold's server certificates also name
  `replica.gpupool.invalid` (base/address_list.h) and a channel to a list checks that name.
- TLS verifies against the configured CA only; with no CA the channel is plaintext (gpupoolctl's
  rule: an --insecure gpupoold on loopback).
- The credential travels as `authorization: Bearer <token>` metadata on every call, as
  gpupoolctl sends it; explicit per-call metadata works over TLS and plaintext alike.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import grpc
import grpc.aio

from gpupool.settings import Settings, read_ca

REPLICA_TLS_NAME = "replica.gpupool.invalid"

Metadata = Tuple[Tuple[str, str], ...]


def grpc_target(server: str) -> str:
    if "," not in server:
        return server
    if (server.find(":") < server.find(",") and not server.startswith("ipv4:")
            and not server.startswith("ipv6:")):
        return "ipv4:" + server
    return server


def _options(settings: Settings) -> List[Tuple[str, str]]:
    if settings.tls and "," in settings.server:
        return [("grpc.ssl_target_name_override", REPLICA_TLS_NAME)]
    return []


def _credentials(settings: Settings) -> Optional[grpc.ChannelCredentials]:
    pem = read_ca(settings)
    return None if pem is None else grpc.ssl_channel_credentials(root_certificates=pem)


def open_channel(settings: Settings) -> grpc.Channel:
    creds = _credentials(settings)
    target = grpc_target(settings.server)
    if creds is None:
        return grpc.insecure_channel(target)
    return grpc.secure_channel(target, creds, options=_options(settings))


def open_aio_channel(settings: Settings) -> grpc.aio.Channel:
    creds = _credentials(settings)
    target = grpc_target(settings.server)
    if creds is None:
        return grpc.aio.insecure_channel(target)
    return grpc.aio.secure_channel(target, creds, options=_options(settings))


def call_metadata(settings: Settings) -> Metadata:
    return (("authorization", "Bearer " + settings.token),) if settings.token else ()
