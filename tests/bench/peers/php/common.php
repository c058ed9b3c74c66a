<?php
// What the PHP peers share: the data folder, the CSRF check, input checks, answers.
// Written as a careful PHP developer would write a small board: lock before reading,
// escape on output, check the token and the input, never trust a path from the client.
declare(strict_types=1);

const MAX_NAME = 64;
const MAX_TEXT = 4000;

function data_dir(): string {
    $dir = $_SERVER['PEER_DATA'] ?? '';
    if ($dir === '' || !is_dir($dir)) fail(500, 'PEER_DATA is not a folder');
    return $dir;
}

function fail(int $status, string $message): never {
    http_response_code($status);
    header('Content-Type: text/plain; charset=utf-8');
    echo $message, "\n";
    exit;
}

// Double-submit token: the kagi_csrf cookie must equal the _csrf field.
function csrf_token(): string {
    $token = $_COOKIE['kagi_csrf'] ?? '';
    if (!preg_match('/^[0-9a-f]{32}$/', $token)) {
        $token = bin2hex(random_bytes(16));
        setcookie('kagi_csrf', $token, ['httponly' => true, 'samesite' => 'Lax', 'path' => '/']);
    }
    return $token;
}

function check_csrf(): void {
    $cookie = $_COOKIE['kagi_csrf'] ?? '';
    $field = $_POST['_csrf'] ?? '';
    if (!is_string($field) || $cookie === '' || !hash_equals($cookie, $field)) {
        fail(403, 'bad or missing CSRF token');
    }
}

// One line of text: valid UTF-8, no control characters, bounded.
function clean_line(mixed $value, int $max): string {
    if (!is_string($value)) return '';
    if (!preg_match('//u', $value)) fail(400, 'broken UTF-8');
    $value = trim(preg_replace('/[\x00-\x1f\x7f]+/', ' ', $value));
    if (strlen($value) > $max) fail(400, 'too long');
    return $value;
}

// Takes an flock on <name>.lock in the data folder; released when the handle is closed.
function lock_file(string $name, int $mode) {
    $fp = fopen(data_dir() . '/' . $name . '.lock', 'c');
    if ($fp === false || !flock($fp, $mode)) fail(503, 'cannot lock ' . $name);
    return $fp;
}

// Writes a whole file atomically: temp file in the same folder, then rename.
function write_atomic(string $path, string $content): void {
    $tmp = $path . '.tmp.' . getmypid();
    if (file_put_contents($tmp, $content) !== strlen($content) || !rename($tmp, $path)) {
        @unlink($tmp);
        fail(500, 'cannot write ' . basename($path));
    }
}

function json_answer(array $value): void {
    header('Content-Type: application/json');
    echo json_encode($value, JSON_UNESCAPED_UNICODE | JSON_HEX_TAG | JSON_HEX_AMP);
}

function request_path(): string {
    return parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH) ?: '/';
}
