"""kagi as a package others build on, end to end (docs/TUTORIAL.md):

1. `cmake --install` into a temp prefix; the tutorial's site (examples/booking) configured
   with only find_package(kagi), built, its own tests run, then served: one request through
   the embedded HTTP front end and one through a real nginx (conf/nginx/kagi.conf) with the
   site under spawn-fcgi, error pages from kagi's installed templates;
2. the same sources built with `pkg-config --cflags --libs kagi` alone;
3. the same project consuming the kagi source tree with add_subdirectory();
4. `cpack -G DEB`: libkagi-dev and kagi-demo, installed with apt-get (as root; otherwise
   unpacked into a temp root and their dependencies checked with apt-get -s), kagi-demo
   --help run from the installed package, the tutorial built against /usr, then removed.
"""

import glob
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))
import harness  # noqa: E402

JOBS = os.environ.get("KAGI_JOBS", "2")


def run(fail, argv, label, cwd=None, env=None, timeout=900):
    out = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=timeout)
    text = out.stdout.decode(errors="replace")
    if out.returncode != 0:
        print(text[-4000:])
    fail.equal(out.returncode, 0, label)
    return text


def build_booking(fail, env, build_dir, label, cmake_args):
    source = os.path.join(env.source, "examples", "booking")
    run(fail, ["cmake", "-S", source, "-B", build_dir, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"]
        + cmake_args, label + ": configure")
    run(fail, ["cmake", "--build", build_dir, "-j" + JOBS], label + ": build")
    text = run(fail, ["ctest", "--test-dir", build_dir, "--output-on-failure"],
               label + ": the site's own tests")
    fail.check("100% tests passed" in text, label + ": ctest passed every test")
    return os.path.join(build_dir, "booking")


def site_settings(env, name, templates_fallback):
    sets = {"templates.dir": os.path.join(env.source, "examples", "booking", "templates"),
            "templates.fallback_dir": templates_fallback,
            "locks.dir": env.path(name, "locks"), "data.dir": env.path(name, "data"),
            "log.access": "false", "server.threads": "2"}
    out = []
    for key, value in sets.items():
        out += ["--set", "%s=%s" % (key, value)]
    return out


def check_site(fail, port, label):
    r = harness.request(port, "GET", "/booking/")
    fail.equal(r.status, 200, label + ": GET /booking/")
    fail.check("Room booking" in r.text() and "orchid" in r.text(), label + ": the rooms page")
    token = r.cookies().get("kagi_csrf") or "none"
    r = harness.request(port, "POST", "/booking/orchid/book",
                        harness.form_body({"_csrf": token, "hour": "9", "name": "ann"}),
                        {"Content-Type": "application/x-www-form-urlencoded",
                         "Cookie": "kagi_csrf=" + token})
    fail.equal(r.status, 303, label + ": a booking")
    r = harness.request(port, "GET", "/booking/")
    fail.check("booked by ann" in r.text(), label + ": the booking is shown")
    r = harness.request(port, "GET", "/nowhere")
    fail.equal(r.status, 404, label + ": an unknown route")
    # The error page comes from kagi's installed templates (templates.fallback_dir).
    fail.check("<html" in r.text(), label + ": the 404 page is kagi's HTML error page")


def serve(fail, env, booking, templates_fallback):
    port = harness.free_port()
    proc = env.start([booking, "--http", "127.0.0.1:%d" % port]
                     + site_settings(env, "http-site", templates_fallback), "booking-http.log")
    harness.wait_for_port(port, proc, "booking (HTTP)")
    check_site(fail, port, "HTTP front end")

    sock = env.path("booking.sock")
    out = subprocess.run(["spawn-fcgi", "-s", sock, "-M", "0666", "-F", "1", "-d", env.dir,
                          "--", booking] + site_settings(env, "fcgi-site", templates_fallback),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
    pids = [int(p) for p in harness.re.findall(r"PID:\s*(\d+)", out.stdout.decode())]
    env.pids += pids
    fail.equal(len(pids), 1, "spawn-fcgi started the site")
    nginx_port = harness.free_port()
    env.nginx(nginx_port, sock)
    check_site(fail, nginx_port, "behind nginx")


def deb_packages(fail, env, build):
    run(fail, ["cpack", "-G", "DEB", "-B", env.path("debs")], "cpack -G DEB", cwd=build)
    debs = {os.path.basename(p).split("_")[0]: p for p in glob.glob(env.path("debs", "*.deb"))}
    fail.check(set(debs) >= {"libkagi-dev", "kagi-demo"}, "cpack built libkagi-dev and "
               "kagi-demo (got %s)" % sorted(debs))
    if "kagi-demo" not in debs or "libkagi-dev" not in debs:
        return
    depends = run(fail, ["dpkg-deb", "-f", debs["kagi-demo"], "Depends"], "dpkg-deb -f")
    fail.check("libctemplate" in depends and "libc6" in depends and "libpq5" in depends,
               "kagi-demo depends on its runtime libraries: " + depends.strip())
    as_root = os.getuid() == 0
    if not as_root:
        # No root: unpack instead, and let apt say whether the dependencies resolve.
        root = env.path("debroot")
        for deb in debs.values():
            run(fail, ["dpkg-deb", "-x", deb, root], "dpkg-deb -x " + os.path.basename(deb))
        text = run(fail, [os.path.join(root, "usr", "bin", "kagi-demo"), "--help"],
                   "kagi-demo --help from the unpacked package")
        fail.check("usage: kagi-demo" in text, "kagi-demo --help prints its usage")
        run(fail, ["apt-get", "install", "-s", debs["libkagi-dev"], debs["kagi-demo"]],
            "apt-get -s install of the packages resolves")
        return
    apt_env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(fail, ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
               debs["libkagi-dev"], debs["kagi-demo"]], "apt-get install ./*.deb", env=apt_env)
    try:
        text = run(fail, ["/usr/bin/kagi-demo", "--help"], "installed kagi-demo --help")
        fail.check("usage: kagi-demo" in text, "installed kagi-demo prints its usage")
        text = run(fail, ["/usr/bin/kagi-locks", "--help"], "installed kagi-locks --help")
        text = run(fail, ["/usr/bin/kagi-lockd", "--help"], "installed kagi-lockd --help")
        fail.check("usage: kagi-lockd" in text, "installed kagi-lockd prints its usage")
        fail.check(os.path.exists("/usr/include/kagi/serve/serve.hpp"),
                   "libkagi-dev installed the headers under /usr/include/kagi/")
        # The tutorial against the packaged kagi, found on the default path.
        booking = build_booking(fail, env, env.path("booking-deb"), "against the .deb", [])
        fail.check(os.path.exists(booking), "built against the .deb")
    finally:
        run(fail, ["apt-get", "remove", "-y", "-qq", "--purge", "kagi-demo", "libkagi-dev"],
            "apt-get remove the packages", env=apt_env)
    fail.check(not os.path.exists("/usr/bin/kagi-demo"), "the packages are gone again")


def test(env, fail):
    build = os.path.abspath(env.args.build)
    prefix = env.path("prefix")
    run(fail, ["cmake", "--install", build, "--prefix", prefix], "cmake --install")
    for path in ("include/kagi/lock/guard.hpp", "include/kagi/serve/serve.hpp",
                 "lib/cmake/kagi/kagiConfig.cmake", "lib/pkgconfig/kagi.pc", "bin/kagi-demo",
                 "share/kagi/templates/errors/error.html", "lib/systemd/system/kagi.service",
                 "bin/kagi-lockd", "lib/systemd/system/kagi-lockd.service",
                 "share/kagi/clients/php/KagiLock.php"):
        fail.check(os.path.exists(os.path.join(prefix, path)), "installed " + path)
    installed_headers = glob.glob(os.path.join(prefix, "include", "**", "*.hpp"), recursive=True)
    fail.check(all("/include/kagi/" in h for h in installed_headers),
               "every installed header is under include/kagi/")

    # 1. find_package(kagi) only.
    booking = build_booking(fail, env, env.path("booking-cmake"), "find_package",
                            ["-DCMAKE_PREFIX_PATH=" + prefix])
    serve(fail, env, booking, os.path.join(prefix, "share", "kagi", "templates"))

    # 2. pkg-config only.
    pc_env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = run(fail, ["pkg-config", "--cflags", "--libs", "kagi"], "pkg-config kagi",
                env=pc_env).split()
    templates = run(fail, ["pkg-config", "--variable=templatesdir", "kagi"],
                    "pkg-config templatesdir", env=pc_env).strip()
    fail.check(os.path.isdir(templates), "pkg-config's templatesdir exists: " + templates)
    source = os.path.join(env.source, "examples", "booking")
    pc_binary = env.path("booking-pc")
    run(fail, ["g++", "-std=c++20", "-O1", os.path.join(source, "main.cpp"),
               os.path.join(source, "booking.cpp"), "-o", pc_binary] + flags,
        "g++ with pkg-config --cflags --libs kagi")
    text = run(fail, [pc_binary, "--help-conf"], "the pkg-config build runs")
    fail.check("[booking]" in text and "first_hour = 9" in text,
               "--help-conf of the pkg-config build lists the app's own section")

    # 3. add_subdirectory(kagi source tree).
    # It compiles kagi's sources again: unoptimised and without debug information (whether the
    # subproject builds and works is the question, not its speed), about half the time.
    build_booking(fail, env, env.path("booking-subdir"), "add_subdirectory",
                  ["-DBOOKING_KAGI_SOURCE=" + env.source, "-DCMAKE_BUILD_TYPE=Debug",
                   "-DCMAKE_CXX_FLAGS_DEBUG=-O0"])

    # 4. Debian packages.
    deb_packages(fail, env, build)


if __name__ == "__main__":
    # harness.parse_args wants --demo/--source; --build is ours.
    build_arg = [a for a in sys.argv if a.startswith("--build=")]
    sys.argv = [a for a in sys.argv if not a.startswith("--build=")]

    def with_build(env, fail):
        env.args.build = build_arg[0].split("=", 1)[1]
        test(env, fail)

    harness.main(with_build, "install")
