// tests/bench/peers/node_hello.js — the Node.js peer of the embedded front end's rows: a plain
// `http` hello, one process per core through `cluster`, as Node sites are deployed.
//   node node_hello.js PORT
"use strict";
const cluster = require("cluster");
const http = require("http");
const os = require("os");

const port = Number(process.argv[2] || 8090);
if (cluster.isPrimary) {
  for (let i = 0; i < os.cpus().length; i++) cluster.fork();
  process.on("SIGTERM", () => {
    for (const id in cluster.workers) cluster.workers[id].kill();
    process.exit(0);
  });
} else {
  http
    .createServer((req, res) => {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("hello\n");
    })
    .listen(port, "127.0.0.1");
}
