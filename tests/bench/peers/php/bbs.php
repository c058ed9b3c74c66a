<?php
// A flock BBS: one serialized file per board, rewritten atomically (temp + rename) under an
// exclusive flock taken BEFORE the read; pages read under a shared flock. Keeps the newest
// KEEP posts, like kagi's bbs.keep.
//   GET  /bbs/{board}/              the newest 20 posts and the form
//   POST /bbs/{board}/post          _csrf, name, body → 303 to the board
//   GET  /bbs/{board}/posts.json    {"last_id": N}
declare(strict_types=1);
require __DIR__ . '/common.php';

const KEEP = 1000;
const PAGE = 20;
const BOARDS = ['general', 'b0', 'b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7'];

function board_file(string $board): string {
    return data_dir() . '/board-' . $board . '.dat';
}

function read_board(string $board): array {
    $raw = @file_get_contents(board_file($board));
    if ($raw === false) return ['last_id' => 0, 'posts' => []];
    $state = unserialize($raw, ['allowed_classes' => false]);
    return is_array($state) ? $state : ['last_id' => 0, 'posts' => []];
}

if (!preg_match('#^/bbs/([a-z0-9]+)/(post|posts\.json)?$#', request_path(), $m)) {
    fail(404, 'no such page');
}
$board = $m[1];
$action = $m[2] ?? '';
if (!in_array($board, BOARDS, true)) fail(404, 'no such board');

if ($action === 'post') {
    if ($_SERVER['REQUEST_METHOD'] !== 'POST') fail(405, 'POST only');
    check_csrf();
    $name = clean_line($_POST['name'] ?? '', MAX_NAME) ?: 'Anonymous';
    $body = $_POST['body'] ?? '';
    if (!is_string($body) || !preg_match('//u', $body)) fail(400, 'broken UTF-8');
    $body = trim($body);
    if ($body === '' || strlen($body) > MAX_TEXT) fail(400, 'empty or too long');

    $lock = lock_file('board-' . $board, LOCK_EX);  // lock, THEN read
    $state = read_board($board);
    $state['last_id']++;
    $state['posts'][] = ['id' => $state['last_id'], 'time' => time(), 'name' => $name,
                         'body' => $body];
    if (count($state['posts']) > KEEP) $state['posts'] = array_slice($state['posts'], -KEEP);
    write_atomic(board_file($board), serialize($state));
    fclose($lock);
    header('Location: /bbs/' . $board . '/', true, 303);
    exit;
}

$lock = lock_file('board-' . $board, LOCK_SH);
$state = read_board($board);
fclose($lock);

if ($action === 'posts.json') {
    json_answer(['last_id' => $state['last_id']]);
    exit;
}

$token = csrf_token();
$h = fn(string $s): string => htmlspecialchars($s, ENT_QUOTES | ENT_SUBSTITUTE, 'UTF-8');
header('Content-Type: text/html; charset=utf-8');
?>
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title><?= $h($board) ?> — board</title></head>
<body><main>
<h1><?= $h($board) ?></h1>
<p><?= count($state['posts']) ?> posts</p>
<?php foreach (array_reverse(array_slice($state['posts'], -PAGE)) as $p): ?>
<article id="p<?= (int)$p['id'] ?>"><h2>#<?= (int)$p['id'] ?> <?= $h($p['name']) ?></h2>
<p class="time"><?= gmdate('Y-m-d H:i', $p['time']) ?> UTC</p>
<p><?= nl2br($h($p['body'])) ?></p></article>
<?php endforeach; ?>
<form method="post" action="/bbs/<?= $h($board) ?>/post">
<input type="hidden" name="_csrf" value="<?= $h($token) ?>">
<input name="name" maxlength="64"><textarea name="body"></textarea><button>Post</button>
</form>
</main></body></html>
