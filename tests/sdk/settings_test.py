"""gpupool.settings and gpupool._channel without a server: the login file as gpupoolctl writes
and reads it (cmd/ctl/client_config.cc), the precedence, and replica lists."""

import os
import tempfile
import unittest

import gpupool
from gpupool import _channel, settings


class SettingsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "config")

    def write(self, text: str) -> None:
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(text)

    def test_config_path_as_gpupoolctl_finds_it(self) -> None:
        self.assertEqual(settings.default_config_path({"GPUPOOL_CONFIG": "/x/c"}), "/x/c")
        self.assertEqual(settings.default_config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}),
                         "/x/gpupool/config")
        self.assertEqual(settings.default_config_path({"HOME": "/h"}), "/h/.config/gpupool/config")
        self.assertEqual(settings.default_config_path({}), "")

    def test_file_then_environment_then_arguments(self) -> None:
        self.write("# gpupoolctl settings\nserver = gpu.example:7070\n"
                   "ca = /etc/gpupool/ca.crt\n  token=abc  \n\n")
        env = {"GPUPOOL_CONFIG": self.path}
        s = gpupool.load_settings(env=env)
        self.assertEqual((s.server, s.ca, s.token), ("gpu.example:7070", "/etc/gpupool/ca.crt",
                                                     "abc"))
        s = gpupool.load_settings(env=dict(env, GPUPOOL_SERVER="b:1", GPUPOOL_TOKEN=""))
        self.assertEqual((s.server, s.token), ("b:1", "abc"), "an empty variable is unset")
        s = gpupool.load_settings("c:2", ca="", token="k", env=env)
        self.assertEqual((s.server, s.ca, s.token, s.tls), ("c:2", "", "k", False))

    def test_defaults_without_a_file(self) -> None:
        s = gpupool.load_settings(env={"GPUPOOL_CONFIG": self.path})
        self.assertEqual((s.server, s.ca, s.token), ("127.0.0.1:7070", "", ""))

    def test_a_bad_line_names_file_and_line(self) -> None:
        self.write("server = a:1\ncolour = blue\n")
        with self.assertRaisesRegex(gpupool.ConfigError, r"config:2: unknown key 'colour'"):
            gpupool.load_settings(env={"GPUPOOL_CONFIG": self.path})
        self.write("server a:1\n")
        with self.assertRaisesRegex(gpupool.ConfigError, r"config:1: expected 'key = value'"):
            gpupool.load_settings(env={"GPUPOOL_CONFIG": self.path})

    def test_an_unreadable_ca_is_a_config_error_before_any_call(self) -> None:
        with self.assertRaisesRegex(gpupool.ConfigError, "CA certificate .*missing.crt"):
            gpupool.Client("127.0.0.1:1", ca=os.path.join(self.dir.name, "missing.crt"))

    def test_replica_lists(self) -> None:
        self.assertEqual(_channel.grpc_target("a:7070"), "a:7070")
        self.assertEqual(_channel.grpc_target("10.0.0.1:7070,10.0.0.2:7070"),
                         "ipv4:10.0.0.1:7070,10.0.0.2:7070")
        self.assertEqual(_channel.grpc_target("ipv4:1.2.3.4:1,1.2.3.5:1"),
                         "ipv4:1.2.3.4:1,1.2.3.5:1")

    def test_metadata_is_a_bearer_token(self) -> None:
        s = gpupool.Settings(token="gpk_abc")
        self.assertEqual(_channel.call_metadata(s), (("authorization", "Bearer gpk_abc"),))
        self.assertEqual(_channel.call_metadata(gpupool.Settings()), ())


if __name__ == "__main__":
    unittest.main()
