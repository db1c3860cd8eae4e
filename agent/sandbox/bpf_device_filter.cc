#include "agent/sandbox/bpf_device_filter.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace gpupool::agent::sandbox {
namespace {

struct Rule {
  int type = 0;        // BPF_DEVCG_DEV_CHAR / BLOCK; 0 = any ('a')
  int64_t major = -1;  // -1 = any
  int64_t minor = -1;
  int access = 0;  // BPF_DEVCG_ACC_* bits
};

Result<Rule> ParseRule(const std::string& text) {
  std::istringstream in(text);
  std::string type, numbers, access;
  in >> type >> numbers >> access;
  Rule r;
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("device rule '" + text + "': " + why);
  };
  if (type == "a") {
    r.access = BPF_DEVCG_ACC_MKNOD | BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE;
    return r;
  }
  if (type == "c") {
    r.type = BPF_DEVCG_DEV_CHAR;
  } else if (type == "b") {
    r.type = BPF_DEVCG_DEV_BLOCK;
  } else {
    return bad("type must be a, b or c");
  }
  const size_t colon = numbers.find(':');
  if (colon == std::string::npos) return bad("expected MAJOR:MINOR");
  auto number = [](const std::string& s, int64_t* out) {
    if (s == "*") return true;
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v < 0 || v > 0xfffff) return false;
    *out = v;
    return true;
  };
  if (!number(numbers.substr(0, colon), &r.major) || !number(numbers.substr(colon + 1), &r.minor)) {
    return bad("MAJOR and MINOR must be numbers or *");
  }
  for (char c : access) {
    if (c == 'r')
      r.access |= BPF_DEVCG_ACC_READ;
    else if (c == 'w')
      r.access |= BPF_DEVCG_ACC_WRITE;
    else if (c == 'm')
      r.access |= BPF_DEVCG_ACC_MKNOD;
    else
      return bad("access must be made of r, w and m");
  }
  if (r.access == 0) return bad("no access given");
  return r;
}

// struct bpf_insn without its bit-fields (GCC warns on copying those through std::vector): the
// same 8 bytes, registers packed as the kernel reads them on little-endian hosts (dst low).
struct Insn8 {
  uint8_t code;
  uint8_t regs;
  int16_t off;
  int32_t imm;
};
static_assert(sizeof(Insn8) == sizeof(bpf_insn));
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "bpf_insn register packing");

Insn8 Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  return Insn8{code, static_cast<uint8_t>((src & 0xf) << 4 | (dst & 0xf)), off, imm};
}

// r2 = type, r3 = access, r4 = major, r5 = minor; then one block per rule.
std::vector<Insn8> Assemble(const std::vector<Rule>& rules) {
  constexpr uint8_t kLdxW = BPF_LDX | BPF_MEM | BPF_W;
  constexpr uint8_t kAnd32 = BPF_ALU | BPF_AND | BPF_K;
  constexpr uint8_t kRsh32 = BPF_ALU | BPF_RSH | BPF_K;
  constexpr uint8_t kMov32Reg = BPF_ALU | BPF_MOV | BPF_X;
  constexpr uint8_t kMov64Imm = BPF_ALU64 | BPF_MOV | BPF_K;
  constexpr uint8_t kJneImm = BPF_JMP | BPF_JNE | BPF_K;
  constexpr uint8_t kExit = BPF_JMP | BPF_EXIT;
  std::vector<Insn8> p;
  p.push_back(Insn(kLdxW, 2, 1, 0, 0));        // r2 = ctx->access_type
  p.push_back(Insn(kAnd32, 2, 0, 0, 0xffff));  // r2 = type
  p.push_back(Insn(kLdxW, 3, 1, 0, 0));
  p.push_back(Insn(kRsh32, 3, 0, 0, 16));  // r3 = access
  p.push_back(Insn(kLdxW, 4, 1, 4, 0));    // r4 = major
  p.push_back(Insn(kLdxW, 5, 1, 8, 0));    // r5 = minor
  for (const Rule& r : rules) {
    std::vector<Insn8> block;
    // Each check jumps to the end of the block (the next rule) when it fails; offsets are
    // filled in once the block's length is known.
    std::vector<size_t> exits;
    if (r.type != 0) {
      exits.push_back(block.size());
      block.push_back(Insn(kJneImm, 2, 0, 0, r.type));
    }
    if (r.major >= 0) {
      exits.push_back(block.size());
      block.push_back(Insn(kJneImm, 4, 0, 0, static_cast<int32_t>(r.major)));
    }
    if (r.minor >= 0) {
      exits.push_back(block.size());
      block.push_back(Insn(kJneImm, 5, 0, 0, static_cast<int32_t>(r.minor)));
    }
    block.push_back(Insn(kMov32Reg, 1, 3, 0, 0));             // r1 = access
    block.push_back(Insn(kAnd32, 1, 0, 0, ~r.access & 0x7));  // what the rule does not allow
    exits.push_back(block.size());
    block.push_back(Insn(kJneImm, 1, 0, 0, 0));
    block.push_back(Insn(kMov64Imm, 0, 0, 0, 1));  // allowed
    block.push_back(Insn(kExit, 0, 0, 0, 0));
    for (size_t at : exits) block[at].off = static_cast<int16_t>(block.size() - at - 1);
    p.insert(p.end(), block.begin(), block.end());
  }
  p.push_back(Insn(kMov64Imm, 0, 0, 0, 0));  // denied
  p.push_back(Insn(kExit, 0, 0, 0, 0));
  return p;
}

long Bpf(int cmd, bpf_attr* attr) { return syscall(__NR_bpf, cmd, attr, sizeof(*attr)); }

Result<int> Load(const std::vector<Insn8>& program) {
  static const char kLicense[] = "Apache-2.0";
  char log[4096] = {};
  bpf_attr attr{};
  attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  attr.insns = reinterpret_cast<uint64_t>(program.data());
  attr.insn_cnt = static_cast<uint32_t>(program.size());
  attr.license = reinterpret_cast<uint64_t>(kLicense);
  attr.log_buf = reinterpret_cast<uint64_t>(log);
  attr.log_size = sizeof(log);
  attr.log_level = 1;
  const long fd = Bpf(BPF_PROG_LOAD, &attr);
  if (fd < 0) {
    const int err = errno;
    std::string msg = std::string("bpf(BPF_PROG_LOAD, cgroup device program): ") + strerror(err);
    if (log[0] != '\0') msg += "; verifier: " + std::string(log, strnlen(log, sizeof(log)));
    return Status::Unavailable(msg);
  }
  return static_cast<int>(fd);
}

}  // namespace

Status AttachDeviceFilter(const std::string& cgroup_dir, const std::vector<std::string>& rules) {
  std::vector<Rule> parsed;
  for (const std::string& text : rules) {
    Result<Rule> r = ParseRule(text);
    if (!r.ok()) return r.status();
    parsed.push_back(*r);
  }
  Result<int> prog = Load(Assemble(parsed));
  if (!prog.ok()) return prog.status();
  const int cg = open(cgroup_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg < 0) {
    const int err = errno;
    close(*prog);
    return Status::Unavailable("open " + cgroup_dir + ": " + strerror(err));
  }
  bpf_attr attr{};
  attr.target_fd = static_cast<uint32_t>(cg);
  attr.attach_bpf_fd = static_cast<uint32_t>(*prog);
  attr.attach_type = BPF_CGROUP_DEVICE;
  attr.attach_flags = 0;  // exclusive: nothing below may add its own program
  const long rc = Bpf(BPF_PROG_ATTACH, &attr);
  const int err = errno;
  close(cg);
  close(*prog);  // the attachment holds the program
  if (rc != 0) {
    return Status::Unavailable("bpf(BPF_PROG_ATTACH, BPF_CGROUP_DEVICE) to " + cgroup_dir + ": " +
                               strerror(err));
  }
  return Status::Ok();
}

Status ProbeDeviceFilter() {
  Result<int> prog = Load(Assemble({}));
  if (!prog.ok()) return prog.status();
  close(*prog);
  return Status::Ok();
}

}  // namespace gpupool::agent::sandbox
