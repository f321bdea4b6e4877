#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The install tree and the Debian package as a user gets them (docs/setup.md, "Install").

usage: install_test.py example|headers|deb SOURCE_DIR BUILD_DIR CXX MPIRUN...

example: `cmake --install` into a temporary prefix; the example (examples/) copied out of the tree, built against
  the prefix by find_package(mori_symm) and once by pkg-config (mori_symm.pc); neither build nor the installed
  files name the source or the build tree (include paths, RUNPATH, the CMake package, the .pc); both builds run
  at 4 ranks on the host runtime with the source and build trees hidden (an empty folder mounted over each, in
  a mount namespace of their own).
headers: every installed header compiles alone (with the flags of mori_symm.pc).
deb: `cpack -G DEB` makes the package (with shlibs and an ldconfig trigger); its Depends name MPI, spdlog and fmt
  and no GPU library (those are loaded at run time); unpacked with dpkg-deb -x, its tools print --version,
  mori-a2a runs a 2-rank host job, the installed mori-validate-json checks that report against the installed
  schemas and mori-perf-check compares it with itself, and the example it carries builds against the unpacked .pc
  and runs at 2 ranks, all with the trees hidden.
"""
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish, job, not_run  # noqa: E402

MODE, SRC, BUILD, CXX = sys.argv[1], os.path.realpath(sys.argv[2]), os.path.realpath(sys.argv[3]), sys.argv[4]
MPIRUN = sys.argv[5:]
TREES = (BUILD, SRC)  # the build tree first: it may lie inside the source tree


def run(cmd, timeout=300, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
    return p.returncode, p.stdout


def names_a_tree(text):
    return [t for t in TREES if t in text]


def dynamic_paths(path):
    """The RUNPATH/RPATH entries of an ELF file."""
    _, out = run(["readelf", "-d", path])
    return ":".join(re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out))


HIDE = 'for d in "$@"; do [ "$d" = -- ] && break; mount -t tmpfs mori-hidden "$d" || exit 125; shift; done; shift; ' \
       'exec "$@"'


def hidden(cmd):
    """cmd run with the source and build trees out of reach, where this machine lets us (root, mount namespaces)."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", HIDE, "sh", *TREES, "--", *cmd]


def can_hide():
    if not shutil.which("unshare") or os.geteuid() != 0:
        return "not root or no unshare"
    rc, out = run(hidden(["sh", "-c", f'test ! -e "{os.path.join(SRC, "CMakeLists.txt")}"']), timeout=30)
    return None if rc == 0 else f"no mount namespace here ({out.strip()[:200]})"


def run_hidden(name, cmd, env=None, expect=None):
    why = can_hide()
    if why:
        not_run(f"{name} with the source and build trees hidden", why)
        rc, out, _ = job(cmd, env=env, timeout=120)
    else:
        rc, out, _ = job(hidden(cmd), env=env, timeout=120)
    check(f"{name}: exit 0" + (f", prints {expect!r}" if expect else ""),
          rc == 0 and (expect is None or re.search(expect, out) is not None), out)
    return out


def install(prefix):
    rc, out = run(["cmake", "--install", BUILD, "--prefix", prefix])
    check("cmake --install into a temporary prefix", rc == 0, out)


def build_with_pkg_config(src, out, pc_dir, rpath):
    """Builds the example by mori_symm.pc; False where pkg-config is missing (the check is then not run)."""
    if not shutil.which("pkg-config"):
        not_run("the example built by pkg-config", "pkg-config is not installed (scripts/deps installs it)")
        return False
    env = dict(os.environ, PKG_CONFIG_PATH=pc_dir)
    rc, flags = run(["pkg-config", "--cflags", "--libs", "mori_symm"], env=env)
    check("pkg-config --cflags --libs mori_symm", rc == 0 and "-lmori_symm" in flags, flags)
    check("mori_symm.pc names neither tree", not names_a_tree(flags), flags)
    rc, log = run([CXX, "-std=c++20", os.path.join(src, "ring_store.cpp"), "-o", out, *flags.split(),
                   f"-Wl,-rpath,{rpath}"])
    check("the example builds by pkg-config", rc == 0, log)
    return True


def example():
    with tempfile.TemporaryDirectory(prefix="mori-install-") as tmp:
        prefix = os.path.join(tmp, "prefix")
        install(prefix)
        installed = "\n".join(open(f, errors="replace").read() for f in
                              glob.glob(f"{prefix}/**/mori_symm*.cmake", recursive=True) +
                              glob.glob(f"{prefix}/**/mori_symm.pc", recursive=True))
        check("the CMake package and the .pc are installed and name neither tree",
              "mori::symm" in installed and "Libs:" in installed and not names_a_tree(installed), installed)
        libs = glob.glob(f"{prefix}/lib*/**/libmori_symm.so.*", recursive=True) or [os.path.join(prefix, "lib", "none")]
        check("libmori_symm.so.0.2 (the SOVERSION) is installed", any(os.path.basename(p) == "libmori_symm.so.0.2"
                                                                       for p in libs), "\n".join(libs))
        src = shutil.copytree(os.path.join(SRC, "examples"), os.path.join(tmp, "example"))
        bld = os.path.join(tmp, "example-build")
        rc, out = run(["cmake", "-S", src, "-B", bld, f"-DCMAKE_PREFIX_PATH={prefix}",
                       f"-DCMAKE_CXX_COMPILER={CXX}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
        check("the example configures by find_package(mori_symm)", rc == 0, out)
        rc, out = run(["cmake", "--build", bld, "-j2"])
        check("the example builds against the install", rc == 0, out)
        commands = open(os.path.join(bld, "compile_commands.json")).read() if rc == 0 else ""
        check("its compile command names neither tree", commands and not names_a_tree(commands), commands)
        exe = os.path.join(bld, "ring_store")
        paths = dynamic_paths(exe) if rc == 0 else SRC
        check(f"its RUNPATH ({paths}) names neither tree", not names_a_tree(paths), paths)
        run_hidden("the CMake build at 4 ranks", [*MPIRUN, "-n", "4", exe, "--backend", "host"],
                   expect=r"(?s)(rank \d of 4: both values.*){4}")
        pc_exe = os.path.join(tmp, "ring_store_pc")
        if build_with_pkg_config(src, pc_exe, os.path.join(os.path.dirname(libs[0]), "pkgconfig"),
                                 os.path.dirname(libs[0])):
            run_hidden("the pkg-config build at 4 ranks", [*MPIRUN, "-n", "4", pc_exe],
                       expect=r"(?s)(rank \d of 4: both values.*){4}")


def headers():
    if not shutil.which("pkg-config"):
        not_run("every installed header compiled alone", "pkg-config is not installed (scripts/deps installs it)")
        return
    with tempfile.TemporaryDirectory(prefix="mori-headers-") as tmp:
        prefix = os.path.join(tmp, "prefix")
        install(prefix)
        pcs = glob.glob(f"{prefix}/**/mori_symm.pc", recursive=True)
        rc, flags = run(["pkg-config", "--cflags", "mori_symm"], env=dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(
            pcs[0]) if pcs else ""))
        check("pkg-config --cflags mori_symm", rc == 0, flags)
        hdrs = sorted(glob.glob(f"{prefix}/include/mori/**/*.hpp", recursive=True))
        check(f"{len(hdrs)} headers installed, none of the tool layer",
              len(hdrs) > 30 and not any("/tool/" in h for h in hdrs), "\n".join(hdrs))

        def alone(h):
            tu = os.path.join(tmp, os.path.relpath(h, prefix).replace("/", "_") + ".cpp")
            with open(tu, "w") as f:
                f.write(f'#include "{os.path.relpath(h, os.path.join(prefix, "include"))}"\n')
            return h, run([CXX, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Werror", tu,
                           *flags.split()])

        with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
            bad = [(h, out) for h, (rc, out) in pool.map(alone, hdrs) if rc != 0]
        check("every installed header compiles alone", not bad, "\n".join(f"{h}:\n{o}" for h, o in bad))


def deb():
    with tempfile.TemporaryDirectory(prefix="mori-deb-") as tmp:
        rc, out = run(["cpack", "-G", "DEB", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-B", tmp],
                      cwd=tmp)
        debs = glob.glob(os.path.join(tmp, "*.deb"))
        check("cpack -G DEB makes one package", rc == 0 and len(debs) == 1, out)
        if not debs:
            return
        _, fields = run(["dpkg-deb", "-f", debs[0], "Package", "Version", "Depends"])
        depends = re.search(r"Depends: (.*)", fields)
        depends = depends.group(1) if depends else ""
        check("its name and version: mori-symm 0.2.0", re.search(r"Package: mori-symm\nVersion: 0\.2\.0", fields),
              fields)
        need = ("libopenmpi", "libspdlog", "libfmt", "libstdc++", "python3")
        check(f"its Depends name {', '.join(need)}", all(n in depends for n in need) or
              ("libmpich" in depends and all(n in depends for n in need[1:])), fields)
        _, info = run(["dpkg-deb", "-I", debs[0]])
        check("it carries shlibs and an ldconfig trigger", "shlibs" in info and "triggers" in info, info)
        check("its Depends name no GPU library", not re.search(r"cuda|nvrtc|hiprtc|amdhip|rocm", depends), fields)
        root = os.path.join(tmp, "root")
        rc, out = run(["dpkg-deb", "-x", debs[0], root])
        check("dpkg-deb -x unpacks it", rc == 0, out)
        usr = os.path.join(root, "usr")
        elves = [f"{usr}/bin/{t}" for t in ("mori-probe", "mori-a2a", "mori-teardown-repro")] + \
            sorted({os.path.realpath(p) for p in glob.glob(f"{usr}/lib*/**/libmori_symm.so", recursive=True)})
        paths = {os.path.basename(e): dynamic_paths(e) for e in elves}
        check(f"the packaged tools and library: RUNPATH names neither tree ({paths})",
              len(elves) == 4 and not names_a_tree(str(paths)) and paths["mori-a2a"].startswith("$ORIGIN/"))
        for tool in ("mori-probe", "mori-a2a", "mori-teardown-repro"):
            run_hidden(f"{tool} --version from the unpacked package", [f"{usr}/bin/{tool}", "--version"],
                       expect=rf"^{tool} 0\.2\.0 ")
        report = os.path.join(tmp, "a2a.json")
        run_hidden("a 2-rank host job of the unpacked mori-a2a",
                   [*MPIRUN, "-n", "2", f"{usr}/bin/mori-a2a", "--backend", "host", "--timeout-s", "30",
                    "--chunk-kib", "64", "--iters", "3", "--warmup", "1", "--json", report])
        run_hidden("the unpacked mori-validate-json validates that report against the unpacked schemas",
                   [f"{usr}/bin/mori-validate-json", "--require", report], expect=r"valid mori\.a2a/")
        run_hidden("the unpacked mori-perf-check comparing that report with itself",
                   [f"{usr}/bin/mori-perf-check", report, report])
        rc, out, _ = job([f"{usr}/bin/mori-perf-check", "--ab", "HEAD", "--", "mori-a2a", "{bin}", "{json}"],
                         timeout=60)
        check("the unpacked mori-perf-check --ab without a checkout: exit 2, saying there is no .git to build REV from",
              rc == 2 and "has no .git" in out and "--baseline-bin" in out and len(out.strip().splitlines()) == 1, out)
        ex = os.path.join(tmp, "ring_store")
        lib = os.path.dirname(glob.glob(f"{usr}/lib*/**/libmori_symm.so", recursive=True)[0])
        if build_with_pkg_config(f"{usr}/share/mori/examples", ex, os.path.join(lib, "pkgconfig"), lib):
            run_hidden("the example from the package at 2 ranks", [*MPIRUN, "-n", "2", ex],
                       expect=r"(?s)(rank \d of 2: both values.*){2}")


{"example": example, "headers": headers, "deb": deb}[MODE]()
finish()
