<?php
// Tests of clients/php/KagiLock.php against a running kagi-lockd.
//   php KagiLockTest.php 127.0.0.1:PORT unix:/path/to/lockd.sock
// Prints one line per check and "N passed, N failed"; exits 1 if any failed.
require __DIR__ . '/../KagiLock.php';

$tcp = $argv[1];
$unix = $argv[2];
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
for ($i = 0; $i < 50; $i++) {
    $a->lock("php/seq/$i", 1000);
    $a->unlock("php/seq/$i");
}
check(true, '50 locks in sequence on one connection');
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

echo "$passed passed, $failed failed\n";
exit($failed === 0 && $passed > 0 ? 0 : 1);
