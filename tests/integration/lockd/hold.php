<?php
// Holds a lock through clients/php/KagiLock.php until told to close (compat_test.py).
//   php hold.php KagiLock.php ADDRESS KEY
// Prints "granted <CLOCK_MONOTONIC ns>" (or "busy ..."), then on "close" from stdin closes
// the connection and prints "closed <ns>" (the time just before the close).
require $argv[1];
$lock = new KagiLock($argv[2]);
$ok = $lock->lock($argv[3], 30000);
echo ($ok ? 'granted ' : 'busy ') . hrtime(true) . "\n";
while (($line = fgets(STDIN)) !== false) {
    if (trim($line) === 'close') {
        $before = hrtime(true);
        $lock->close();
        echo "closed $before\n";
    }
}
