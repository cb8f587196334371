#!/usr/bin/env python3
"""CO-RE check: resolve every kernel type, field, function and tracepoint the bpf/ programs use
against several kernels' BTF, and say which ones differ.

The programs declare only the fields they read (bpf/sp_core.h, all preserve_access_index); libbpf
relocates them from the running kernel's BTF at load time. A field missing on one kernel fails the
load, unless the program guards it with bpf_core_field_exists(); a field whose width changes is
read correctly only where the program asks bpf_core_field_size(). This script reads those
declarations and guards from the sources, and each kernel's BTF with bpftool, so the lab can report
(and fail on) the differences before a boot would show them as a tier that did not load.

Usage: core_fields.py NAME=BTF_OR_VMLINUZ ... [--markdown]
  BTF_OR_VMLINUZ: a raw BTF file (/sys/kernel/btf/vmlinux), an ELF vmlinux, a bzImage whose
  payload is zstd/xz/gzip compressed (Debian's amd64 /boot/vmlinuz-*), unpacked to a temporary file,
  or an uncompressed arm64 Image (Debian's arm64 vmlinuz), whose .BTF is cut out by its header.
Exit status: 0 all required items resolve everywhere, 1 a required item is missing somewhere,
2 usage or tool error.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BPF = os.path.join(REPO, "bpf")
MAGICS = ((b"\x28\xb5\x2f\xfd", ["zstd", "-dcq"]), (b"\xfd7zXZ\x00", ["xz", "-dcq", "--single-stream"]),
          (b"\x1f\x8b\x08\x00", ["gzip", "-dcq"]))


def declared():
    """(struct, field, type) of sp_core.h's preserve_access_index block; flavours (x___y) kept."""
    text = open(os.path.join(BPF, "sp_core.h")).read()
    block = text.split("#pragma clang attribute push", 1)[1].split("#pragma clang attribute pop", 1)[0]
    block = re.sub(r"/\*.*?\*/", "", block, flags=re.S)
    out = []
    for name, body in re.findall(r"struct\s+(\w+)\s*\{(.*?)\};", block, re.S):
        for decl in body.split(";"):
            m = re.search(r"(\w+)\s*(\[\d+\])?\s*$", decl.strip())
            if m:
                out.append((name, m.group(1), decl.strip()[:m.start()].strip()))
    return out


def guarded(decls):
    """(struct, field) pairs the programs test with bpf_core_field_exists() before reading. The
    struct comes from a cast in the expression, from the type of the member before the field
    (sk->sk_cgrp_data.cgroup: sock.sk_cgrp_data is a struct sock_cgroup_data), or else from the
    declared structs that have a field of that name."""
    types = {(s, f): t for s, f, t in decls}
    pairs = set()
    for f in os.listdir(BPF):
        if not f.endswith((".bpf.c", ".bpf.h")):
            continue
        src = open(os.path.join(BPF, f)).read()
        for arg in re.findall(r"bpf_core_field_exists\((.*?)\)\s*(?:&&|\)|\|\|)", src):
            idents = re.findall(r"\w+", arg)
            field, prev = idents[-1], idents[-2] if len(idents) > 1 else ""
            cast = re.search(r"struct\s+(\w+)\s*\*\s*\)", arg)
            owner = [t.split()[-1] for (s, fl), t in types.items() if fl == prev and t.startswith("struct ")]
            if cast:
                pairs.add((cast.group(1), field))
            elif owner:
                pairs.add((owner[0], field))
            else:
                pairs.update((s, fl) for s, fl, _ in decls if fl == field)
    return pairs


def attach_targets():
    """[(kind, target)] from the SEC() names: functions for fentry/fexit/kprobe, tracepoints for
    tp_btf/raw_tp (iterators are covered by their bpf_iter__* context structs)."""
    out = set()
    for f in sorted(os.listdir(BPF)):
        if f.endswith(".bpf.c"):
            for kind, target in re.findall(r'SEC\("\??(fentry|fexit|kprobe|tp_btf|raw_tp)/(\w+)"\)',
                                           open(os.path.join(BPF, f)).read()):
                out.add(("tracepoint" if kind in ("tp_btf", "raw_tp") else "function", target))
    return sorted(out)


def enum_values():
    """(enum, enumerator, guarded) of every bpf_core_enum_value() in the programs; guarded when the
    same enumerator is also tested with bpf_core_enum_value_exists()."""
    out = {}
    for f in sorted(os.listdir(BPF)):
        if f.endswith((".bpf.c", ".bpf.h")):
            src = open(os.path.join(BPF, f)).read()
            for kind, enum, name in re.findall(r"bpf_core_enum_value(_exists)?\(\s*enum\s+(\w+)\s*,\s*(\w+)\s*\)",
                                               src):
                out[(enum, name)] = out.get((enum, name), False) or bool(kind)
    return sorted((e, n, g) for (e, n), g in out.items())


def btf_file(path, tmp):
    """A file bpftool can read BTF from: path itself, or the ELF vmlinux unpacked from a bzImage."""
    with open(path, "rb") as f:
        head = f.read(4)
        if head in (b"\x9f\xeb\x01\x00", b"\x7fELF"):
            return path
        f.seek(0)
        data = f.read()
    for magic, cmd in MAGICS:
        at = data.find(magic)
        while at >= 0:
            out = os.path.join(tmp, os.path.basename(path) + ".vmlinux")
            with open(out, "wb") as o:
                # Trailing bzImage data after the stream makes the tools complain; the output is whole.
                subprocess.run(cmd, input=data[at:], stdout=o, stderr=subprocess.DEVNULL)
            with open(out, "rb") as o:
                if o.read(4) == b"\x7fELF":
                    return out
            at = data.find(magic, at + 1)
    raw = raw_btf(data, path, tmp)
    if raw:
        return raw
    raise SystemExit(f"core_fields: no ELF vmlinux found in {path}")


def raw_btf(data, path, tmp):
    """The .BTF section of a raw kernel image (arm64's Image: Debian's arm64 vmlinuz is neither ELF nor
    compressed), found by its header: magic 0xeb9f, version 1, a 24-byte header, the type section first
    and the string section right after it, within the image. The largest such blob is the kernel's."""
    import struct
    best = None
    at = data.find(b"\x9f\xeb\x01\x00")
    while at >= 0:
        if at + 24 <= len(data):
            hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<5I", data, at + 4)
            size = hdr_len + str_off + str_len
            if (hdr_len == 24 and type_off == 0 and str_off == type_len and type_len > 0 and str_len > 0
                    and at + size <= len(data) and (best is None or size > best[1])):
                best = (at, size)
        at = data.find(b"\x9f\xeb\x01\x00", at + 1)
    if not best:
        return None
    out = os.path.join(tmp, os.path.basename(path) + ".btf")
    with open(out, "wb") as o:
        o.write(data[best[0]:best[0] + best[1]])
    return out


class Btf:
    def __init__(self, path):
        p = subprocess.run(["bpftool", "-j", "btf", "dump", "file", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise SystemExit(f"core_fields: bpftool btf dump file {path}: {p.stderr.strip()}")
        self.types = {t["id"]: t for t in json.loads(p.stdout)["types"]}
        self.by_name = {}
        for t in self.types.values():
            # Several types may share a name (forward declarations); keep the one with most members.
            prev = self.by_name.get((t["kind"], t.get("name")))
            if prev is None or len(t.get("members", [])) > len(prev.get("members", [])):
                self.by_name[(t["kind"], t.get("name"))] = t

    def resolve(self, tid):
        t = self.types.get(tid)
        while t and t["kind"] in ("TYPEDEF", "CONST", "VOLATILE", "RESTRICT", "TYPE_TAG"):
            t = self.types.get(t["type_id"])
        return t

    def describe(self, tid):
        t = self.resolve(tid)
        if t is None:
            return "void"
        if t["kind"] == "PTR":
            return "ptr"
        if t["kind"] == "ARRAY":
            return f"{self.describe(t['type_id'])}[{t['nr_elems']}]"
        if t["kind"] in ("INT", "ENUM"):
            return f"{t['size'] * 8}-bit"
        return f"{t['kind'].lower()} {t.get('name') or ''}".strip()

    def field(self, struct, name):
        """The type of a (possibly nested-anonymous) member, or None. Offsets are left out: they
        differ between any two kernels and CO-RE relocates them."""
        s = self.by_name.get(("STRUCT", struct))
        if s is None:
            return None
        stack = [(s, 0)]
        while stack:
            t, base = stack.pop()
            for m in t.get("members", []):
                off = base + m["bits_offset"] // 8
                if m["name"] == name:
                    return self.describe(m["type_id"])
                inner = self.resolve(m["type_id"])
                if m["name"] in ("", "(anon)") and inner and inner["kind"] in ("STRUCT", "UNION"):
                    stack.append((inner, off))
        return None

    def offset(self, struct, name):
        """The byte offset of a member (possibly in a nested anonymous struct or union), or None: for
        the lab's kernel-side trace, which fetches fields by offset (kprobe_events), not by CO-RE."""
        s = self.by_name.get(("STRUCT", struct))
        stack = [(s, 0)] if s else []
        while stack:
            t, base = stack.pop()
            for m in t.get("members", []):
                off = base + m["bits_offset"] // 8
                if m["name"] == name:
                    return off
                inner = self.resolve(m["type_id"])
                if m["name"] in ("", "(anon)") and inner and inner["kind"] in ("STRUCT", "UNION"):
                    stack.append((inner, off))
        return None

    def function(self, name):
        f = self.by_name.get(("FUNC", name))
        if f is None:
            return None
        proto = self.types.get(f["type_id"])
        return "(" + ", ".join(p["name"] for p in proto.get("params", [])) + ")"

    def tracepoint(self, name):
        """"N args" of the tracepoint (the programs pick a variant by arity, e.g. kfree_skb gained
        rx_sk in 6.11), or None."""
        t = self.by_name.get(("TYPEDEF", f"btf_trace_{name}"))
        if t is None:
            return None
        proto = self.resolve(t["type_id"])
        if proto and proto["kind"] == "PTR":
            proto = self.types.get(proto["type_id"])
        if not proto or proto["kind"] != "FUNC_PROTO":
            return "present"
        return f"{len(proto.get('params', [])) - 1} args"  # the first is the context pointer

    def enum_value(self, enum, name):
        e = self.by_name.get(("ENUM", enum))
        for v in (e or {}).get("values", []):
            if v["name"] == name:
                return str(v["val"])
        return None


def check(kernels):
    """kernels: [(name, btf path)] -> (rows, failures). A row: (item, required, {kernel: value})."""
    btfs = [(n, Btf(p)) for n, p in kernels]
    decls = declared()
    guards = guarded(decls)
    rows = []
    for struct, field, _ in decls:
        base = struct.split("___")[0]
        # An iterator's context struct exists exactly where the iterator does (cgroup iterators from 6.1):
        # where it is absent the agent finds no such iterator and skips that tier, nothing else fails.
        required = (struct, field) not in guards and not base.startswith("bpf_iter__")
        rows.append((f"struct {base}.{field}" + (f" (as {struct})" if "___" in struct else ""), required,
                     {n: b.field(base, field) for n, b in btfs}))
    rows.append(("enum cgroup_subsys_id.memory_cgrp_id", True,
                 {n: b.enum_value("cgroup_subsys_id", "memory_cgrp_id") for n, b in btfs}))
    for enum, name, guard in enum_values():
        if (enum, name) != ("cgroup_subsys_id", "memory_cgrp_id"):
            rows.append((f"enum {enum}.{name}", not guard, {n: b.enum_value(enum, name) for n, b in btfs}))
    for kind, target in attach_targets():
        get = (lambda b, t=target: b.function(t)) if kind == "function" else (lambda b, t=target: b.tracepoint(t))
        # Every attach point has another attach type to fall back to, but each must be known to its tier.
        rows.append((f"{kind} {target}", True, {n: get(b) for n, b in btfs}))
    fails = [(item, n) for item, req, vals in rows if req for n, v in vals.items() if v is None]
    return rows, fails


def markdown(kernels, rows):
    names = [n for n, _ in kernels]
    out = ["| item | guarded | " + " | ".join(names) + " | differs |", "|---|---|" + "---|" * len(names) + "---|"]
    for item, req, vals in rows:
        cells = [f"`{vals[n]}`" if vals[n] is not None else "**absent**" for n in names]
        differs = len({vals[n] for n in names}) > 1
        out.append(f"| {item} | {'no' if req else 'yes'} | " + " | ".join(cells) + f" | {'**yes**' if differs else ''} |")
    return "\n".join(out)


# The members the lab's vmpressure trace reads, from the memcg argument to its cgroup's name:
# mem_cgroup.css.cgroup -> cgroup.kn -> kernfs_node.name (guest/proxy.sh).
TRACE_OFFSETS = (("mem_cgroup", "css"), ("cgroup_subsys_state", "cgroup"), ("cgroup", "kn"), ("kernfs_node", "name"))


def offsets(path):
    """--offsets IMAGE: "struct.member=OFFSET ..." for TRACE_OFFSETS, or an error naming the missing one."""
    with tempfile.TemporaryDirectory() as tmp:
        b = Btf(btf_file(path, tmp))
    out = []
    for struct, member in TRACE_OFFSETS:
        off = b.offset(struct, member)
        if off is None:
            raise SystemExit(f"core_fields: no {struct}.{member} in the BTF of {path}")
        out.append(f"{struct}.{member}={off}")
    return " ".join(out)


def main(argv):
    if len(argv) == 2 and argv[0] == "--offsets":
        print(offsets(argv[1]))
        return 0
    specs = [a for a in argv if "=" in a]
    if not specs or not shutil.which("bpftool"):
        print(__doc__ if not specs else "core_fields: bpftool not found (Debian package bpftool)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        kernels = [(n, btf_file(p, tmp)) for n, p in (s.split("=", 1) for s in specs)]
        rows, fails = check(kernels)
    print(markdown(kernels, rows))
    for item, n in fails:
        print(f"MISSING on {n}: {item} (required: no bpf_core_field_exists guard)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
