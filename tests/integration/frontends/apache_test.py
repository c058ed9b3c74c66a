"""A real Apache (mod_proxy_fcgi, enablereuse=on) with conf/apache/kagi.conf in front of
kagi-demo under spawn-fcgi (2 processes x 4 threads): see webserver_suite.py."""

import harness
import webserver_suite


def test(env, fail):
    webserver_suite.run(env, fail, "apache", lambda port, sock: env.apache(port, sock))


if __name__ == "__main__":
    harness.main(test, "apache")
