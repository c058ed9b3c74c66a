<?php
/**
 * KagiLock — a PHP client for kagi-lockd, the network lock server (docs/LOCKD.md).
 *
 *   require_once 'KagiLock.php';
 *   $lock = new KagiLock('127.0.0.1:1006');          // or 'unix:/run/kagi-lockd/lockd.sock'
 *   if (!$lock->lock('bbs/board/3', 3000)) {          // wait up to 3 s
 *       http_response_code(503);                      // busy: someone else holds it
 *       exit;
 *   }
 *   $posts = file_get_contents($file);                // read under the lock
 *   file_put_contents($tmp, $posts . $new); rename($tmp, $file);
 *   $lock->unlock('bbs/board/3');                     // or let the script end
 *
 * What it does differently from the classic one-function clients of such servers:
 *  - the answer line is compared without its line break ("ok\n" is "ok"), so a granted lock
 *    is reported as granted;
 *  - every wait has a bound (the server ends it and answers "busy"), and every read of an
 *    answer a deadline (the bound plus a grace), so a PHP page never hangs on the lock server;
 *  - one connection holds many locks (UNLOCK keeps it open); shared locks, all-or-nothing
 *    sets and fencing tokens are there too.
 * Whatever happens, the locks go when the connection closes: at close(), when the object is
 * destroyed, when the script ends or when the PHP process dies. A connection that holds
 * nothing and that the server closed meanwhile (its idle timeout, a restart) is replaced
 * without a word; one that held locks is not (they are gone: the call throws).
 *
 * Failures other than "busy" (server down, refused command, bad key) throw
 * KagiLockException; the connection is closed then, which releases everything it held.
 */

class KagiLockException extends RuntimeException
{
}

final class KagiLock
{
    /** The server takes labels of up to 512 bytes. */
    private const MAX_LABEL_BYTES = 500;
    /** @var resource|null */
    private $sock = null;
    private string $address;
    private float $connectTimeout;
    private int $defaultTimeoutMs;
    private float $graceSeconds;
    private ?string $secret;
    private ?string $label;
    /** @var array<string,int> key => fencing token of the locks held */
    private array $tokens = [];

    /**
     * @param string $address 'HOST:PORT', '[V6]:PORT' or 'unix:/path'
     * @param array  $options 'connect_timeout' (seconds, 2), 'timeout_ms' (the default wait
     *                        bound, 10000), 'grace' (seconds to wait for an answer past a
     *                        wait's bound, 1), 'secret' (the server's shared secret, for a
     *                        server on another host), 'label' (shown by STATUS beside this
     *                        connection's locks, e.g. the script and the request)
     */
    public function __construct(string $address = '127.0.0.1:1006', array $options = [])
    {
        $this->address = $address;
        $this->connectTimeout = (float)($options['connect_timeout'] ?? 2.0);
        $this->defaultTimeoutMs = (int)($options['timeout_ms'] ?? 10000);
        $this->graceSeconds = (float)($options['grace'] ?? 1.0);
        $this->secret = $options['secret'] ?? null;
        if ($this->secret !== null &&
            ($this->secret === '' || self::utf8Text($this->secret, 512) !== $this->secret)) {
            throw new KagiLockException(
                'secret: AUTH sends it on one line: 1..512 bytes of UTF-8, no control characters');
        }
        // A label of any bytes: cut to what the server takes, as valid UTF-8.
        $label = $options['label'] ?? null;
        $this->label = $label === null ? null : self::utf8Text((string)$label, self::MAX_LABEL_BYTES);
    }

    public function __destruct()
    {
        $this->close();
    }

    /**
     * Takes $key exclusively, waiting up to $timeoutMs (null: the default; 0: do not wait).
     * True when held, false when the wait ran out ("busy").
     */
    public function lock(string $key, ?int $timeoutMs = null): bool
    {
        return $this->take('LOCK', $key, $timeoutMs);
    }

    /** Takes $key shared (beside other shared holders); as lock(). */
    public function shared(string $key, ?int $timeoutMs = null): bool
    {
        return $this->take('SHARED', $key, $timeoutMs);
    }

    /**
     * Takes several keys at once, all or nothing, in the server's canonical order (so two
     * scripts taking the same keys never deadlock). $modes: key => 'x' (exclusive) or 's'.
     */
    public function lockSet(array $modes, ?int $timeoutMs = null): bool
    {
        if ($modes === []) {
            throw new KagiLockException('lockSet needs at least one key');
        }
        $keys = array_map('strval', array_keys($modes));
        $letters = '';
        foreach ($keys as $key) {
            $this->checkKey($key);
            $mode = $modes[$key];
            if ($mode !== 'x' && $mode !== 's') {
                throw new KagiLockException("lockSet: mode of '$key' must be 'x' or 's'");
            }
            $letters .= $mode;
        }
        $ms = $this->bound($timeoutMs);
        $answer = $this->call("LOCKSET $letters/$ms " . implode(' ', $keys), $ms);
        if ($answer === 'busy') {
            return false;
        }
        $tokens = $this->tokensOf($answer, count($keys));
        foreach ($keys as $i => $key) {
            $this->tokens[$key] = $tokens[$i];
        }
        return true;
    }

    /** Releases $key, or every lock of this connection when null. The connection stays. */
    public function unlock(?string $key = null): void
    {
        if ($this->sock === null) {
            $this->tokens = [];
            return;  // nothing is held without a connection
        }
        if ($key === null) {
            $this->expect($this->call('UNLOCK', 0), 'ok');
            $this->tokens = [];
            return;
        }
        $this->checkKey($key);
        $this->expect($this->call("UNLOCK $key", 0), 'ok');
        unset($this->tokens[$key]);
    }

    /** The fencing token of a held key (increases with every grant of the key), or null. */
    public function token(string $key): ?int
    {
        return $this->tokens[$key] ?? null;
    }

    /** True if the server says this connection still holds $key with its token. */
    public function verify(string $key): bool
    {
        $token = $this->tokens[$key] ?? null;
        if ($token === null || $this->sock === null) {
            return false;
        }
        return $this->call("VERIFY $key $token", 0) === 'ok';
    }

    /** Closes the connection: every lock it held is released by the server. */
    public function close(): void
    {
        if ($this->sock !== null) {
            fclose($this->sock);
            $this->sock = null;
        }
        $this->tokens = [];
    }

    private function take(string $verb, string $key, ?int $timeoutMs): bool
    {
        $this->checkKey($key);
        $ms = $this->bound($timeoutMs);
        $answer = $this->call("$verb $key $ms", $ms);
        if ($answer === 'busy') {
            return false;
        }
        $this->tokens[$key] = $this->tokensOf($answer, 1)[0];
        return true;
    }

    private function bound(?int $timeoutMs): int
    {
        $ms = $timeoutMs ?? $this->defaultTimeoutMs;
        if ($ms < 0 || $ms > 86400000) {
            throw new KagiLockException("timeout $ms ms is out of range (0..86400000)");
        }
        return $ms;
    }

    private function checkKey(string $key): void
    {
        // preg_match with /u fails (false) on bytes that are not UTF-8.
        if ($key === '' || strlen($key) > 256 || preg_match('/[\x00-\x20\x7f]/u', $key) !== 0) {
            throw new KagiLockException(
                "bad key '$key': 1..256 bytes of UTF-8, no spaces or control characters");
        }
    }

    /** @return int[] the tokens of an "ok <t1> <t2>..." answer */
    private function tokensOf(string $answer, int $count): array
    {
        $parts = explode(' ', $answer);
        if ($parts[0] !== 'ok' || count($parts) !== $count + 1) {
            $this->close();
            throw new KagiLockException("kagi-lockd {$this->address}: unexpected answer '$answer'");
        }
        return array_map('intval', array_slice($parts, 1));
    }

    private function expect(string $answer, string $want): void
    {
        if ($answer !== $want) {
            $this->close();
            throw new KagiLockException("kagi-lockd {$this->address}: answered '$answer'");
        }
    }

    private function connect(): void
    {
        $target = str_starts_with($this->address, 'unix:')
            ? 'unix://' . substr($this->address, 5)
            : 'tcp://' . $this->address;
        $errno = 0;
        $errstr = '';
        $sock = @stream_socket_client($target, $errno, $errstr, $this->connectTimeout);
        if ($sock === false) {
            throw new KagiLockException("kagi-lockd {$this->address}: cannot connect: $errstr");
        }
        $this->sock = $sock;
        if ($this->secret !== null) {
            $this->expect($this->exchange("AUTH {$this->secret}", 0, false), 'ok');
        }
        if ($this->label !== null && $this->label !== '') {
            $this->expect($this->exchange('CLIENT ' . $this->label, 0, false), 'ok');
        }
    }

    /**
     * Sends one command line; its answer without the line break. A connection that holds
     * nothing may have been closed by the server meanwhile (lockd.idle_timeout_ms, a
     * restart): it is replaced, once, and the command sent on the new one.
     */
    private function call(string $line, int $waitMs): string
    {
        $fresh = false;
        if ($this->sock !== null && $this->tokens === [] && $this->serverSpoke()) {
            $this->close();  // an idle connection is sent nothing unless the server ended it
        }
        if ($this->sock === null) {
            $this->connect();
            $fresh = true;
        }
        $mayBeStale = !$fresh && $this->tokens === [];
        $answer = $this->exchange($line, $waitMs, $mayBeStale);
        if ($answer === null) {  // closed by the server before our line: nothing was lost
            $this->close();
            $this->connect();
            $answer = $this->exchange($line, $waitMs, false);
        }
        return $answer;
    }

    /** True if the server sent something (or closed) on a connection that asked nothing. */
    private function serverSpoke(): bool
    {
        $read = [$this->sock];
        $write = null;
        $except = null;
        $n = @stream_select($read, $write, $except, 0, 0);
        return $n === false || $n > 0;
    }

    /**
     * One line out, one answer in, both within bounds. With $mayBeStale, a connection the
     * server had closed (a failed send, an end of file, "error idle timeout") gives null
     * instead of an exception.
     */
    private function exchange(string $line, int $waitMs, bool $mayBeStale): ?string
    {
        $data = $line . "\n";
        while ($data !== '') {
            $n = @fwrite($this->sock, $data);
            if ($n === false || $n === 0) {
                if ($mayBeStale) {
                    return null;
                }
                $this->close();
                throw new KagiLockException("kagi-lockd {$this->address}: connection lost while sending");
            }
            $data = substr($data, $n);
        }
        // The server ends a wait at its bound; the answer may take a little longer to come.
        $limit = $waitMs / 1000.0 + $this->graceSeconds;
        stream_set_timeout($this->sock, (int)$limit, (int)(fmod($limit, 1.0) * 1e6));
        $answer = fgets($this->sock);
        if ($answer === false) {
            $timedOut = stream_get_meta_data($this->sock)['timed_out'];
            if ($mayBeStale && !$timedOut) {
                return null;
            }
            $this->close();
            throw new KagiLockException("kagi-lockd {$this->address}: " .
                ($timedOut ? "no answer within {$limit} s" : 'the server closed the connection'));
        }
        $answer = rtrim($answer, "\r\n");  // the line break is not part of the answer
        if ($mayBeStale && str_starts_with($answer, 'error idle timeout')) {
            return null;
        }
        if (str_starts_with($answer, 'error ')) {
            $this->close();
            throw new KagiLockException("kagi-lockd {$this->address}: $answer");
        }
        return $answer;
    }

    /**
     * $text as a line the server takes: at most $maxBytes bytes of valid UTF-8, never cut
     * inside a character; control characters and bytes that are not UTF-8 become '?'. Plain
     * PHP (Debian's php-cli has no mbstring).
     */
    private static function utf8Text(string $text, int $maxBytes): string
    {
        preg_match_all(
            '/[\x20-\x7e]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]' .
            '|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]' .
            '|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2}|./s',
            $text,
            $chars
        );
        $out = '';
        foreach ($chars[0] as $char) {
            if (strlen($char) === 1 && (ord($char) < 0x20 || ord($char) > 0x7e)) {
                $char = '?';
            }
            if (strlen($out) + strlen($char) > $maxBytes) {
                break;
            }
            $out .= $char;
        }
        return $out;
    }
}
