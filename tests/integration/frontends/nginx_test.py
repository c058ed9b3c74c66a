"""A real nginx with conf/nginx/kagi.conf in front of kagi-demo under spawn-fcgi
(2 processes x 4 threads): see webserver_suite.py for what is checked."""

import harness
import webserver_suite


def test(env, fail):
    webserver_suite.run(env, fail, "nginx", lambda port, sock: env.nginx(port, sock))


if __name__ == "__main__":
    harness.main(test, "nginx")
