"""Where gpupoold is, which CA to trust and which credential to send: gpupoolctl's settings.

The SDK reads exactly what gpupoolctl reads (docs/cli.md, "Logging in"), so a user who ran
`gpupoolctl login` once needs no arguments here either:

- the login file: `$GPUPOOL_CONFIG`, else `$XDG_CONFIG_HOME/gpupool/config`, else
  `~/.config/gpupool/config`; lines of `key = value` with keys `server`, `ca` (a path to a PEM CA
  certificate) and `token`; `#` starts a comment. A missing file is empty settings;
- precedence per setting: an argument, then the environment (GPUPOOL_SERVER, GPUPOOL_TOKEN,
  GPUPOOL_CA; an empty variable counts as unset), then the file, then the default;
- defaults: server 127.0.0.1:7070, no CA (plaintext), no credential. A CA set means TLS that
  verifies gpupoold's certificate against that CA only, gpupoolctl's rule; gpupoold serves TLS
  by default, so the CA is what a fresh install needs (`<data-dir>/tls/ca.crt`).

The file holds a secret; the SDK only reads it (gpupoolctl writes it, mode 0600).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from gpupool.errors import ConfigError

DEFAULT_SERVER = "127.0.0.1:7070"
_KEYS = ("server", "ca", "token")


@dataclass(frozen=True)
class Settings:
    """Resolved connection settings. `ca` is a path ("" = plaintext); `token` "" = none sent."""

    server: str = DEFAULT_SERVER
    ca: str = ""
    token: str = ""
    config_path: str = ""

    @property
    def tls(self) -> bool:
        return bool(self.ca)

    def __repr__(self) -> str:  # never print the credential
        token = f"{self.token[:8]}… ({len(self.token)} characters)" if self.token else "(none)"
        return (f"Settings(server={self.server!r}, ca={self.ca!r}, token={token}, "
                f"config_path={self.config_path!r})")


def default_config_path(env: Optional[Mapping[str, str]] = None) -> str:
    """The login file's path, as gpupoolctl computes it; "" when no location is known."""
    e = os.environ if env is None else env
    if "GPUPOOL_CONFIG" in e:
        return e["GPUPOOL_CONFIG"]
    if e.get("XDG_CONFIG_HOME"):
        return f"{e['XDG_CONFIG_HOME']}/gpupool/config"
    if e.get("HOME"):
        return f"{e['HOME']}/.config/gpupool/config"
    return ""


def read_config_file(path: str) -> dict[str, str]:
    """The file's settings by key. Missing file: {}. A bad line: ConfigError naming file:line."""
    if not path:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from e
    found: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip(" \t\r")
        if not line or line.startswith("#"):
            continue
        key, eq, value = line.partition("=")
        if not eq:
            raise ConfigError(f"{path}:{n}: expected 'key = value'")
        key = key.strip(" \t\r")
        if key not in _KEYS:
            raise ConfigError(f"{path}:{n}: unknown key '{key}' (expected server, ca or token)")
        found[key] = value.strip(" \t\r")
    return found


def load_settings(server: Optional[str] = None, *, token: Optional[str] = None,
                  ca: Optional[str] = None, config_path: Optional[str] = None,
                  env: Optional[Mapping[str, str]] = None) -> Settings:
    """Resolves the settings: arguments (None = not given), environment, login file, defaults."""
    e = os.environ if env is None else env
    path = default_config_path(e) if config_path is None else config_path
    saved = read_config_file(path)

    def pick(arg: Optional[str], var: str, key: str, default: str) -> str:
        if arg is not None:
            return arg
        return e.get(var) or saved.get(key) or default

    return Settings(
        server=pick(server, "GPUPOOL_SERVER", "server", DEFAULT_SERVER),
        ca=pick(ca, "GPUPOOL_CA", "ca", ""),
        token=pick(token, "GPUPOOL_TOKEN", "token", ""),
        config_path=path,
    )


def read_ca(settings: Settings) -> Optional[bytes]:
    """The CA certificate's PEM bytes, or None for plaintext; ConfigError when unreadable."""
    if not settings.ca:
        return None
    try:
        pem = Path(settings.ca).read_bytes()
    except OSError as e:
        raise ConfigError(f"CA certificate {settings.ca}: cannot read: {e.strerror}") from e
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise ConfigError(f"CA certificate {settings.ca}: not a PEM certificate")
    return pem
