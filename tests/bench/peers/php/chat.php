<?php
// A flock chat: one append-only log per room ("id\ttime\tname\ttext\n"), appended under an
// exclusive flock taken before the last id is read; read under a shared flock. Compacted to
// the newest KEEP messages when it holds twice as many. (kagi waits for four times chat.keep:
// its reads decode only what is new. Every read here reads the whole room, so twice is this
// peer's faster choice, and it keeps it.)
//   POST /chat/{room}/say        _csrf, name, text → {"id": N}
//   GET  /chat/{room}/messages   ?since=ID → {"messages": [...], "last": N}
declare(strict_types=1);
require __DIR__ . '/common.php';

const KEEP = 200;

function room_file(string $room): string {
    return data_dir() . '/room-' . $room . '.log';
}

// Every message of the log, oldest first; a torn last line (no "\n") is skipped.
function read_room(string $room): array {
    $raw = @file_get_contents(room_file($room));
    if ($raw === false || $raw === '') return [];
    $out = [];
    foreach (explode("\n", $raw) as $line) {
        $f = explode("\t", $line, 4);
        if (count($f) === 4) {
            $out[] = ['id' => (int)$f[0], 'name' => $f[2], 'text' => $f[3], 'time' => (int)$f[1]];
        }
    }
    return $out;
}

function line_of(array $m): string {
    return $m['id'] . "\t" . $m['time'] . "\t" . $m['name'] . "\t" . $m['text'] . "\n";
}

if (!preg_match('#^/chat/(lobby)/(say|messages)$#', request_path(), $m)) fail(404, 'no such page');
$room = $m[1];

if ($m[2] === 'say') {
    if ($_SERVER['REQUEST_METHOD'] !== 'POST') fail(405, 'POST only');
    check_csrf();
    $name = clean_line($_POST['name'] ?? '', MAX_NAME) ?: 'Anonymous';
    $text = clean_line($_POST['text'] ?? '', MAX_TEXT);
    if ($text === '') fail(400, 'empty message');

    $lock = lock_file('room-' . $room, LOCK_EX);  // lock, THEN read the last id
    $messages = read_room($room);
    $last = $messages ? end($messages)['id'] : 0;
    $msg = ['id' => $last + 1, 'time' => time(), 'name' => $name, 'text' => $text];
    if (count($messages) + 1 > 2 * KEEP) {
        $keep = array_slice($messages, -(KEEP - 1));
        $keep[] = $msg;
        write_atomic(room_file($room), implode('', array_map('line_of', $keep)));
    } else {
        $line = line_of($msg);
        if (file_put_contents(room_file($room), $line, FILE_APPEND) !== strlen($line)) {
            fail(500, 'cannot append');
        }
    }
    fclose($lock);
    json_answer(['id' => $msg['id']]);
    exit;
}

$since = max(0, (int)($_GET['since'] ?? 0));
$lock = lock_file('room-' . $room, LOCK_SH);
$messages = read_room($room);
fclose($lock);
$last = $messages ? end($messages)['id'] : 0;
$newer = array_values(array_filter($messages, fn($m) => $m['id'] > $since));
json_answer(['messages' => array_slice($newer, -KEEP), 'last' => $last]);
