<?php
// The PHP-FPM hello world: the same body as kagi's /_test/hello.
header('Content-Type: text/plain; charset=utf-8');
echo "hello\n";
