<?php
// Verify a kobo webhook delivery (PHP 7.4+, no extensions beyond the
// defaults).
//
// Usage: KOBO_WEBHOOK_SECRET=whsec_... php verify.php HEADERS_FILE BODY_FILE
//
// HEADERS_FILE holds the request's headers, one `Name: value` a line (as
// `curl -D` writes them); BODY_FILE the raw body, byte for byte. Exits 0
// when the signature is valid and fresh, 1 when it is not, 2 on a usage
// error. In a web app: verify($secret, $_SERVER['HTTP_SERVICE_SIGNATURE'],
// $_SERVER['HTTP_SERVICE_EVENT_ID'], file_get_contents('php://input')).

const TOLERANCE_SECONDS = 300;

function verify(string $secret, string $signatureHeader, string $eventId, string $body, ?int $now = null): bool
{
    $timestamps = [];
    $signatures = [];
    foreach (explode(',', $signatureHeader) as $part) {
        $kv = explode('=', $part, 2);
        if (count($kv) !== 2) {
            continue;
        }
        if ($kv[0] === 't') {
            $timestamps[] = $kv[1];
        } elseif ($kv[0] === 'v1') {
            $signatures[] = $kv[1];
        }
    }
    if (count($timestamps) !== 1 || !ctype_digit($timestamps[0]) || !$signatures) {
        return false;
    }
    $t = (int) $timestamps[0];
    if (abs(($now ?? time()) - $t) > TOLERANCE_SECONDS) {
        return false; // too old (or from the future): a replay
    }
    $expected = hash_hmac('sha256', $t . '.' . $eventId . '.' . $body, $secret);
    foreach ($signatures as $s) {
        if (hash_equals($expected, $s)) {
            return true;
        }
    }
    return false;
}

function main(array $argv): int
{
    $secret = getenv('KOBO_WEBHOOK_SECRET') ?: '';
    if (count($argv) !== 3 || $secret === '') {
        fwrite(STDERR, "Usage: KOBO_WEBHOOK_SECRET=whsec_... php verify.php HEADERS_FILE BODY_FILE\n");
        return 2;
    }
    $headers = [];
    foreach (file($argv[1], FILE_IGNORE_NEW_LINES) as $line) {
        $kv = explode(':', $line, 2);
        if (count($kv) === 2) {
            $headers[strtolower(trim($kv[0]))] = trim($kv[1]);
        }
    }
    $body = file_get_contents($argv[2]);
    $ok = verify(
        $secret,
        $headers['service-signature'] ?? '',
        $headers['service-event-id'] ?? '',
        $body
    );
    echo $ok ? "valid\n" : "invalid signature\n";
    return $ok ? 0 : 1;
}

exit(main($argv));
