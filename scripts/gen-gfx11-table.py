#!/usr/bin/env python3
"""Generates gfx9/src/gfx11/table.rs: gfx11 (RDNA3) opcode numbers -> the kfd-gfx9 operations.

Every opcode number of every gfx11 encoding is disassembled with `llvm-mc-19 --disassemble
-mcpu=gfx1100`; the mnemonic LLVM names it with is mapped to the gfx9 operation of the same
meaning (RENAMES: gfx11's renames of gfx9 operations) or to a gfx11-only operation (GFX11:
`Gfx11Op`). Names with no such operation are left out (they decode to UnknownOpcode).
`gfx9/tests/gfx11.rs` re-checks each table entry against llvm-mc.

Usage: scripts/gen-gfx11-table.py > gfx9/src/gfx11/table.rs && cargo fmt --all   (a few minutes;
the output, formatted, is the committed table byte for byte)
"""
import json, os, re, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def dis1(ws):
    b = []
    for w in ws:
        b += ["0x%02x" % ((w >> (8 * i)) & 0xff) for i in range(4)]
    p = subprocess.run(["llvm-mc-19", "--disassemble", "-triple=amdgcn", "-mcpu=gfx1100"],
                       input=" ".join(b) + "\n", capture_output=True, text=True)
    if "invalid" in p.stderr:
        return None
    outs = [l.strip() for l in p.stdout.splitlines() if l.strip() and not l.strip().startswith(".text")]
    return outs[0].split()[0] if outs else None

def first_valid(variants):
    for v in variants:
        r = dis1(v)
        if r:
            return r
    return None

# Per encoding: the opcode numbers that are the encoding's (not another's prefix), and words
# with plausible operands for each (the first one LLVM accepts names the opcode).
ENCODINGS = {
    "Sop2": (range(0x60), lambda op: [[0x80000000 | op << 23 | 1 << 16 | 2 << 8 | 3]]),
    "Sopk": (range(0x1d), lambda op: [[0xb0000000 | op << 23 | 1 << 16 | 0x10]]),
    "Sop1": (range(256), lambda op: [[0xbe800000 | 2 << 16 | op << 8 | 4], [0xbe800000 | op << 8 | 0x80]]),
    "Sopc": (range(128), lambda op: [[0xbf000000 | op << 16 | 1 << 8 | 2]]),
    "Sopp": (range(128), lambda op: [[0xbf800000 | op << 16]]),
    "Smem": (range(256), lambda op: [[0xf4000000 | op << 18 | 2 << 6, 0xf8000010]]),
    "Vop2": (range(0x3e), lambda op: [[op << 25 | 1 << 17 | 3 << 9 | 0x102],
                                      [op << 25 | 1 << 17 | 3 << 9 | 0x102, 0x40000000]]),
    "Vop1": (range(256), lambda op: [[0x7e000000 | 1 << 17 | op << 9 | 0x102], [0x7e000000 | op << 9]]),
    "Vopc": (range(256), lambda op: [[0x7c000000 | op << 17 | 3 << 9 | 0x102]]),
    "Vop3a": (range(1024), lambda op: [
        [0xd4000000 | op << 16 | 2, 0x106 << 9 | 0x102],
        [0xd4000000 | op << 16 | 2, 0x102],
        [0xd4000000 | op << 16 | 2 | 106 << 8, 0x106 << 9 | 0x102],
        [0xd4000000 | op << 16 | 2, 0x104 << 18 | 0x106 << 9 | 0x102],
        [0xd4000000 | op << 16 | 2 | 106 << 8, 0x104 << 18 | 0x106 << 9 | 0x102],
        [0xd4000000 | op << 16 | 2, 0x6a << 18 | 0x106 << 9 | 0x102]]),
    "Vop3p": (range(128), lambda op: [
        [0xcc000000 | op << 16 | 1 | 1 << 14, 3 << 27 | 0x103 << 9 | 0x102],
        [0xcc000000 | op << 16 | 1, 0x103 << 9 | 0x102],
        [0xcc000000 | op << 16 | 1 | 1 << 14, 3 << 27 | 0x104 << 18 | 0x103 << 9 | 0x102],
        [0xcc000000 | op << 16 | 1, 0x104 << 18 | 0x103 << 9 | 0x102]]),
    "Ds": (range(256), lambda op: [
        [0xd8000000 | op << 18, 4 << 24 | 3 << 16 | 2 << 8 | 1], [0xd8000000 | op << 18, 2 << 8 | 1],
        [0xd8000000 | op << 18, 4 << 24 | 1], [0xd8000000 | op << 18 | 1 << 17, 0]]),
    "Flat": (range(128), lambda op: [
        [0xdc000000 | op << 18, 4 << 24 | 0x7c << 16 | 6 << 8 | 2],
        [0xdc000000 | op << 18 | 2 << 16, 4 << 24 | 0x7c << 16 | 6 << 8 | 2]]),
    "Mubuf": (range(256), lambda op: [[0xe0000000 | op << 18, 3 << 24 | 1 << 16 | 1 << 8 | 2]]),
}

# The Rust enum a gfx9 mnemonic is looked up in, per gfx11 encoding.
FAMILY = {"Sop2": ["Sop2"], "Sopk": ["Sopk"], "Sop1": ["Sop1"], "Sopc": ["Sopc"], "Sopp": ["Sopp"],
          "Smem": ["Smem"], "Vop2": ["Vop2", "Vop3"], "Vop1": ["Vop1", "Vop3"], "Vopc": ["Vopc"],
          "Vop3p": ["Vop3p"], "Ds": ["Ds"], "Flat": ["Flat"], "Mubuf": ["Mubuf"]}

# gfx11's names of gfx9 operations (same semantics; RDNA3 ISA guide vs the MI200 guide).
RENAMES = {
    "s_and_not1_b32": "s_andn2_b32", "s_and_not1_b64": "s_andn2_b64",
    "s_or_not1_b32": "s_orn2_b32", "s_or_not1_b64": "s_orn2_b64",
    "s_and_not1_saveexec_b64": "s_andn2_saveexec_b64", "s_or_not1_saveexec_b64": "s_orn2_saveexec_b64",
    "s_and_not0_saveexec_b64": "s_andn1_saveexec_b64", "s_or_not0_saveexec_b64": "s_orn1_saveexec_b64",
    "s_and_not0_wrexec_b64": "s_andn1_wrexec_b64", "s_and_not1_wrexec_b64": "s_andn2_wrexec_b64",
    "s_ctz_i32_b32": "s_ff1_i32_b32", "s_ctz_i32_b64": "s_ff1_i32_b64",
    "s_clz_i32_u32": "s_flbit_i32_b32", "s_clz_i32_u64": "s_flbit_i32_b64",
    "s_cls_i32": "s_flbit_i32", "s_cls_i32_i64": "s_flbit_i32_i64",
    "v_clz_i32_u32": "v_ffbh_u32", "v_ctz_i32_b32": "v_ffbl_b32", "v_cls_i32": "v_ffbh_i32",
    "v_cvt_floor_i32_f32": "v_cvt_flr_i32_f32", "v_cvt_nearest_i32_f32": "v_cvt_rpi_i32_f32",
    "v_add_nc_u32": "v_add_u32", "v_sub_nc_u32": "v_sub_u32", "v_subrev_nc_u32": "v_subrev_u32",
    "v_add_co_ci_u32": "v_addc_co_u32", "v_sub_co_ci_u32": "v_subb_co_u32",
    "v_subrev_co_ci_u32": "v_subbrev_co_u32", "v_add_nc_i32": "v_add_i32", "v_sub_nc_i32": "v_sub_i32",
    "v_dot2acc_f32_f16": "v_dot2c_f32_f16", "v_cvt_pk_rtz_f16_f32": "v_cvt_pkrtz_f16_f32",
    "s_dcache_inv": "s_dcache_inv",
}
# Memory renames: b32 -> dword and friends, applied to the name without its segment prefix.
MEM = [("load_b32", "load_dword"), ("load_b64", "load_dwordx2"), ("load_b96", "load_dwordx3"),
       ("load_b128", "load_dwordx4"), ("load_b256", "load_dwordx8"), ("load_b512", "load_dwordx16"),
       ("store_b32", "store_dword"), ("store_b64", "store_dwordx2"), ("store_b96", "store_dwordx3"),
       ("store_b128", "store_dwordx4"), ("load_u8", "load_ubyte"), ("load_i8", "load_sbyte"),
       ("load_u16", "load_ushort"), ("load_i16", "load_sshort"), ("store_b8", "store_byte"),
       ("store_b16", "store_short"), ("store_d16_hi_b8", "store_byte_d16_hi"),
       ("store_d16_hi_b16", "store_short_d16_hi"), ("load_d16_u8", "load_ubyte_d16"),
       ("load_d16_i8", "load_sbyte_d16"), ("load_d16_b16", "load_short_d16"),
       ("load_d16_hi_u8", "load_ubyte_d16_hi"), ("load_d16_hi_i8", "load_sbyte_d16_hi"),
       ("load_d16_hi_b16", "load_short_d16_hi")]
ATOMIC = {"swap_b32": "swap", "cmpswap_b32": "cmpswap", "add_u32": "add", "sub_u32": "sub",
          "min_i32": "smin", "min_u32": "umin", "max_i32": "smax", "max_u32": "umax",
          "and_b32": "and", "or_b32": "or", "xor_b32": "xor", "inc_u32": "inc", "dec_u32": "dec",
          "swap_b64": "swap_x2", "cmpswap_b64": "cmpswap_x2", "add_u64": "add_x2", "sub_u64": "sub_x2",
          "min_i64": "smin_x2", "min_u64": "umin_x2", "max_i64": "smax_x2", "max_u64": "umax_x2",
          "and_b64": "and_x2", "or_b64": "or_x2", "xor_b64": "xor_x2", "inc_u64": "inc_x2",
          "dec_u64": "dec_x2", "add_f32": "add_f32"}
DS = [("ds_store_2addr_stride64_", "ds_write2st64_"), ("ds_store_2addr_", "ds_write2_"),
      ("ds_load_2addr_stride64_", "ds_read2st64_"), ("ds_load_2addr_", "ds_read2_"),
      ("ds_storexchg_2addr_stride64_rtn_", "ds_wrxchg2st64_rtn_"),
      ("ds_storexchg_2addr_rtn_", "ds_wrxchg2_rtn_"), ("ds_storexchg_rtn_", "ds_wrxchg_rtn_"),
      ("ds_store_", "ds_write_"), ("ds_load_", "ds_read_")]
# gfx11-only operations: Gfx11Op variants (gfx9/src/opcode.rs).
GFX11 = {
    "s_and_saveexec_b32": "SAndSaveexecB32", "s_or_saveexec_b32": "SOrSaveexecB32",
    "s_xor_saveexec_b32": "SXorSaveexecB32", "s_nand_saveexec_b32": "SNandSaveexecB32",
    "s_nor_saveexec_b32": "SNorSaveexecB32", "s_xnor_saveexec_b32": "SXnorSaveexecB32",
    "s_and_not0_saveexec_b32": "SAndNot0SaveexecB32", "s_or_not0_saveexec_b32": "SOrNot0SaveexecB32",
    "s_and_not1_saveexec_b32": "SAndNot1SaveexecB32", "s_or_not1_saveexec_b32": "SOrNot1SaveexecB32",
    "s_and_not0_wrexec_b32": "SAndNot0WrexecB32", "s_and_not1_wrexec_b32": "SAndNot1WrexecB32",
    "s_sendmsg_rtn_b32": "SSendmsgRtnB32", "s_sendmsg_rtn_b64": "SSendmsgRtnB64",
    "s_waitcnt_vscnt": "SWaitcntVscnt", "s_waitcnt_vmcnt": "SWaitcntVmcnt",
    "s_waitcnt_expcnt": "SWaitcntExpcnt", "s_waitcnt_lgkmcnt": "SWaitcntLgkmcnt",
    "s_delay_alu": "SDelayAlu", "s_clause": "SClause", "s_waitcnt_depctr": "SWaitcntDepctr",
    "s_set_inst_prefetch_distance": "SSetInstPrefetchDistance", "s_wait_idle": "SWaitIdle",
    "s_gl1_inv": "SGl1Inv", "buffer_gl0_inv": "BufferGl0Inv", "buffer_gl1_inv": "BufferGl1Inv",
    "v_fmamk_f32": "VFmamkF32", "v_fmaak_f32": "VFmaakF32",
}
# Left out: results of 16 bits (gfx11's VGPR halves are not modelled), and operations whose
# gfx11 semantics differ from the gfx9 one of the same name (lane-crossing by wave size).
def excluded(enc, name):
    if enc in ("Vop1", "Vop2", "Vop3a") and re.search(r"_(f16|i16|u16|b16)$", name) \
            and not name.startswith("v_cmp") and name not in ("v_cvt_f32_f16",):
        return True
    return name.startswith(("ds_permute", "ds_bpermute", "ds_swizzle", "ds_cmpstore",
                            "v_permlane", "v_readlane_b32_wave", "ds_load_addtid", "ds_store_addtid"))

def gfx9_mnemonics():
    src = open(os.path.join(ROOT, "gfx9/src/opcode.rs")).read()
    table = {}
    for m in re.finditer(r"opcodes! \{\s*(?:///[^\n]*\n\s*)*(?:#\[[^\]]*\]\s*)*(\w+)Op \{(.*?)\n    \}\n\}", src, re.S):
        fam, body = m.group(1), m.group(2)
        for v in re.finditer(r"(\w+) = (0x[0-9a-f]+|\d+) \"([\w]+)\"", body):
            table.setdefault(fam, {})[v.group(3)] = v.group(1)
    return table

def main():
    g9 = gfx9_mnemonics()
    out = {}
    with ThreadPoolExecutor(3) as ex:
        for enc, (ops, f) in ENCODINGS.items():
            names = list(ex.map(first_valid, [f(op) for op in ops]))
            out[enc] = [(op, n) for op, n in zip(ops, names) if n]
    rows = {}
    for enc, entries in out.items():
        for op, full in entries:
            name = re.sub(r"_e(32|64)$", "", full)
            if excluded(enc, name):
                continue
            rust = None
            if name in GFX11:
                rust = f"Opcode::Gfx11(Gfx11Op::{GFX11[name]})"
            else:
                g = RENAMES.get(name, name)
                if enc == "Vop3a":
                    fams = ["Vopc"] if op < 0x100 else ["Vop2"] if op < 0x180 else ["Vop1"] if op < 0x200 else ["Vop3", "Vop2", "Vop1"]
                elif enc in ("Flat", "Mubuf", "Smem"):
                    fams = FAMILY[enc]
                    prefix = ""
                    if enc == "Flat":
                        prefix, g = re.match(r"(flat_|global_|scratch_)(.*)", g).groups()
                    for a, b in MEM:
                        if g.endswith(a) or g == a or ("_" + a) in "_" + g:
                            g = g.replace(a, b)
                            break
                    if enc == "Smem":
                        g = g.replace("_b32", "_dword").replace("_b64", "_dwordx2").replace("_b128", "_dwordx4").replace("_b256", "_dwordx8").replace("_b512", "_dwordx16")
                    am = re.match(r"(buffer_)?atomic_(.*)", g)
                    if am and am.group(2) in ATOMIC:
                        g = (am.group(1) or "") + "atomic_" + ATOMIC[am.group(2)]
                elif enc == "Ds":
                    fams = FAMILY[enc]
                    for a, b in DS:
                        if g.startswith(a):
                            g = b + g[len(a):]
                            break
                    g = {"ds_read_u8": "ds_read_u8", "ds_write_b8_d16_hi": "ds_write_b8_d16_hi"}.get(g, g)
                    g = g.replace("ds_read_u8_d16", "ds_read_u8_d16")
                else:
                    fams = FAMILY[enc]
                for fam in fams:
                    if g in g9.get(fam, {}):
                        var = g9[fam][g]
                        if enc == "Flat":
                            rust = f"Opcode::Flat(Segment::Flat, FlatOp::{var})"
                        else:
                            rust = f"Opcode::{fam}({fam}Op::{var})"
                        break
            if rust:
                rows.setdefault(enc, []).append((op, name, rust))
    print("//! Generated by `scripts/gen-gfx11-table.py` from LLVM 19's gfx1100 disassembler (see")
    print("//! there, and `gfx9/tests/gfx11.rs`, which checks every entry against llvm-mc): per gfx11")
    print("//! encoding, `(opcode number, LLVM mnemonic, the operation it decodes to)`, by number.")
    print("//! A FLAT entry's segment is the instruction's SEG field's, not the one written here.")
    print()
    print("use crate::opcode::*;")
    print()
    print("type Row = (u16, &'static str, Opcode);")
    print()
    for enc in ENCODINGS:
        r = rows.get(enc, [])
        print(f"pub(super) const {enc.upper()}: &[Row] = &[")
        for op, name, rust in r:
            print(f"    ({op:#x}, \"{name}\", {rust}),")
        print("];")
        print()
    print("/// The table of `encoding`.")
    print("pub(super) fn rows(encoding: Encoding) -> &'static [Row] {")
    print("    match encoding {")
    for enc in ENCODINGS:
        print(f"        Encoding::{enc} => {enc.upper()},")
    print("        _ => &[],")
    print("    }")
    print("}")

main()
