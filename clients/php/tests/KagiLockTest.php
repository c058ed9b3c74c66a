<?php
// Tests of clients/php/KagiLock.php against a running kagi-lockd.
//   php KagiLockTest.php 127.0.0.1:PORT unix:/path/to/lockd.sock 127.0.0.1:PORT2
// The third address is a second server with a short lockd.idle_timeout_ms (under a second).
// Prints one line per check and "N passed, N failed"; exits 1 if any failed.
require __DIR__ . '/../KagiLock.php';

$tcp = $argv[1];
$unix = $argv[2];
$shortIdle = $argv[3];
$passed = 0;
$failed = 0;

function check(bool $ok, string $what): void
{
    global $passed, $failed;
    echo ($ok ? 'ok   ' : 'FAIL ') . $what . "\n";
    $ok ? $passed++ : $failed++;
}

function throws(callable $f): ?string
{
    try {
        $f();
    } catch (KagiLockException $e) {
        return $e->getMessage();
    }
    return null;
}

/** The server's STATUS lines, decoded (null for a line that is not JSON). */
function status(string $address): array
{
    $s = stream_socket_client('tcp://' . $address, $errno, $errstr, 2);
    fwrite($s, "STATUS\n");
    stream_set_timeout($s, 2);
    $out = [];
    while (($line = fgets($s)) !== false && rtrim($line) !== 'end') {
        $out[] = json_decode(rtrim($line), true);
    }
    fclose($s);
    return $out;
}

/** The labels STATUS shows beside the holders of $key. */
function labels(string $address, string $key): array
{
    foreach (status($address) as $entry) {
        if ($entry !== null && $entry['key'] === $key) {
            return array_map(fn($h) => $h['label'], $entry['holders']);
        }
    }
    return [];
}

$a = new KagiLock($tcp, ['label' => 'KagiLockTest a']);
$b = new KagiLock($tcp);

check($a->lock('php/x', 1000) === true, 'lock() reports a granted lock as granted');
$t1 = $a->token('php/x');
check(is_int($t1) && $t1 > 0, "a granted lock has a token ($t1)");
check($a->verify('php/x'), 'verify() while held');
$start = hrtime(true);
check($b->lock('php/x', 0) === false, 'a second client is told busy at once with timeout 0');
check($b->lock('php/x', 200) === false, 'and busy after its 200 ms bound');
$waited = (hrtime(true) - $start) / 1e6;
check($waited >= 200 && $waited < 1500, sprintf('the bounded wait took %.0f ms', $waited));
$a->unlock('php/x');
check(!$a->verify('php/x'), 'verify() is false once released');
check($b->lock('php/x', 1000) === true, 'the second client gets it after unlock()');
check($b->token('php/x') > $t1, 'the next grant has a larger token');
$b->unlock();

check($a->shared('php/s', 1000) && $b->shared('php/s', 1000), 'two shared holders at once');
$c = new KagiLock($unix);
check($c->lock('php/s', 100) === false, 'an exclusive request waits for shared holders (unix socket)');
$a->unlock('php/s');
$b->unlock('php/s');
check($c->lock('php/s', 1000) === true, 'and is granted when they are gone');
$c->close();

// One connection, many locks in sequence; a set all or nothing.
$sequence = true;
for ($i = 0; $i < 50; $i++) {
    $sequence = $sequence && $a->lock("php/seq/$i", 1000) === true && $a->token("php/seq/$i") > 0;
    $a->unlock("php/seq/$i");
    $sequence = $sequence && $a->token("php/seq/$i") === null;
}
check($sequence, '50 locks in sequence on one connection, each granted with a token and released');
$d = new KagiLock($tcp);
check($d->lock('php/seq/49', 0) === true, 'and the last one is free again');
$d->close();
check($b->lock('php/set/b', 1000), 'b holds php/set/b');
check($a->lockSet(['php/set/c' => 'x', 'php/set/a' => 's', 'php/set/b' => 'x'], 150) === false,
    'a set with a held key is busy');
$d = new KagiLock($tcp);
check($d->lock('php/set/a', 0) && $d->lock('php/set/c', 0), 'and holds nothing of the set meanwhile');
$d->close();
$b->close();  // closing releases
check($a->lockSet(['php/set/c' => 'x', 'php/set/a' => 's', 'php/set/b' => 'x'], 1000) === true,
    'the set is granted when free');
check($a->token('php/set/a') !== null && $a->token('php/set/c') !== null, 'with a token per key');
$a->unlock();

// Errors are exceptions and close the connection (releasing what it held).
check(throws(fn() => $a->lock('bad key', 0)) !== null, 'a key with a space is refused');
check(throws(fn() => $a->lock("caf\xff", 0)) !== null, 'a key that is not UTF-8 is refused');
$a->lock('php/e', 1000);
$msg = throws(fn() => $a->unlock('php/not-held'));
check($msg !== null && str_contains($msg, 'not held'), "unlock of a key not held: $msg");
$e = new KagiLock($tcp);
check($e->lock('php/e', 1000) === true, 'the error closed the connection and released its lock');
$e->close();
$dead = new KagiLock('127.0.0.1:1', ['connect_timeout' => 1]);
check(throws(fn() => $dead->lock('x', 0)) !== null, 'no server: an exception, not a hang');

// A server that accepts and never answers: the wait's bound plus the grace, then an exception.
$silent = stream_socket_server('tcp://127.0.0.1:0');
$silentAddress = stream_socket_get_name($silent, false);
$mute = new KagiLock($silentAddress, ['grace' => 0.3]);
$start = hrtime(true);
$msg = throws(fn() => $mute->lock('php/mute', 200));
$took = (hrtime(true) - $start) / 1e6;
check($msg !== null && str_contains($msg, 'no answer within') && $took >= 450 && $took < 2000,
    sprintf('a server that never answers: "%s" after %.0f ms (bound 200 ms + 300 ms grace)', $msg, $took));
fclose($silent);

// Labels of any bytes: cut to the server's limit on a character boundary, invalid bytes
// replaced, so every lock() still works and STATUS shows valid UTF-8.
$long = new KagiLock($tcp, ['label' => str_repeat('掲示板', 60)]);  // 540 bytes of UTF-8
check($long->lock('php/label/long', 0) === true, 'a 540-byte UTF-8 label: lock() works');
$shown = labels($tcp, 'php/label/long');
check(count($shown) === 1 && strlen($shown[0]) <= 500 && strlen($shown[0]) % 3 === 0 &&
      str_starts_with($shown[0], '掲示板'), 'and STATUS shows it cut between characters (' .
      strlen($shown[0] ?? '') . ' bytes)');
$raw = new KagiLock($tcp, ['label' => "bbs.php \x80\x81 sjis \x82\xa0 tab\there"]);
check($raw->lock('php/label/raw', 0) === true, 'a label that is not UTF-8: lock() works');
$shown = labels($tcp, 'php/label/raw');
check($shown === ['bbs.php ?? sjis ?? tab?here'], 'and STATUS shows it with ? for each bad byte: ' .
      json_encode($shown));
$long->close();
$raw->close();
check(throws(fn() => new KagiLock($tcp, ['secret' => "two\nlines"])) !== null,
    'a secret AUTH cannot carry is refused at once');

// An idle connection the server closed (lockd.idle_timeout_ms) is replaced: nothing was held.
$idle = new KagiLock($shortIdle);
check($idle->lock('php/idle', 0) === true, 'a lock on the short-idle server');
$idle->unlock('php/idle');
usleep(1500 * 1000);  // longer than that server's idle timeout
$msg = throws(function () use ($idle, &$again) {
    $again = $idle->lock('php/idle', 0);
});
check($msg === null && $again === true, 'after the server closed the idle connection, lock() ' .
      'reconnects: ' . ($msg ?? 'granted'));
$idle->close();

echo "$passed passed, $failed failed\n";
exit($failed === 0 && $passed > 0 ? 0 : 1);
