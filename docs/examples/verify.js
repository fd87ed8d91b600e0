#!/usr/bin/env node
// Verify a kobo webhook delivery (Node.js, built-in modules only).
//
// Usage: KOBO_WEBHOOK_SECRET=whsec_... node verify.js HEADERS_FILE BODY_FILE
//
// HEADERS_FILE holds the request's headers, one `Name: value` a line (as
// `curl -D` writes them); BODY_FILE the raw body, byte for byte. Exits 0
// when the signature is valid and fresh, 1 when it is not, 2 on a usage
// error. In a web app, call verify() with the raw body (a Buffer, e.g.
// express.raw({type: 'application/json'})) before parsing it.
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');

const TOLERANCE_SECONDS = 300;

function verify(secret, signatureHeader, eventId, body, now = Date.now() / 1000) {
  const parts = signatureHeader.split(',').map((p) => {
    const i = p.indexOf('=');
    return i < 0 ? [p, ''] : [p.slice(0, i), p.slice(i + 1)];
  });
  const timestamps = parts.filter(([k]) => k === 't').map(([, v]) => v);
  const signatures = parts.filter(([k]) => k === 'v1').map(([, v]) => v);
  if (timestamps.length !== 1 || !/^[0-9]+$/.test(timestamps[0]) || signatures.length === 0) {
    return false;
  }
  const t = Number(timestamps[0]);
  if (Math.abs(now - t) > TOLERANCE_SECONDS) {
    return false; // too old (or from the future): a replay
  }
  const expected = crypto
    .createHmac('sha256', secret)
    .update(`${t}.${eventId}.`)
    .update(body)
    .digest();
  return signatures.some((s) => {
    const given = Buffer.from(s, 'hex');
    return given.length === expected.length && crypto.timingSafeEqual(given, expected);
  });
}

function main() {
  const secret = process.env.KOBO_WEBHOOK_SECRET || '';
  if (process.argv.length !== 4 || !secret) {
    console.error('Usage: KOBO_WEBHOOK_SECRET=whsec_... node verify.js HEADERS_FILE BODY_FILE');
    return 2;
  }
  const headers = {};
  for (const line of fs.readFileSync(process.argv[2], 'utf8').split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const body = fs.readFileSync(process.argv[3]);
  const ok = verify(
    secret,
    headers['service-signature'] || '',
    headers['service-event-id'] || '',
    body,
  );
  console.log(ok ? 'valid' : 'invalid signature');
  return ok ? 0 : 1;
}

module.exports = { verify };
if (require.main === module) process.exit(main());
