// A Cloudflare Email Worker that hands every message it receives to
// mailsink's POST /v1/inbound, raw and byte for byte, with the SMTP
// envelope. Set MAILSINK_URL in wrangler.toml and the key as a secret:
//   wrangler secret put MAILSINK_API_KEY

// forward posts message (a ForwardableEmailMessage) to mailsink. A refusal
// for good (400, 409, 413, 422: the message itself is wrong or too large)
// rejects the message with mailsink's reason, so the sender gets a bounce;
// anything else (mailsink unreachable, 5xx, 429, a wrong key) throws, so
// that Cloudflare answers a temporary failure and the sender retries.
export async function forward(message, env, fetchImpl = fetch) {
  if (!env.MAILSINK_URL || !env.MAILSINK_API_KEY) {
    throw new Error("set MAILSINK_URL (wrangler.toml) and the MAILSINK_API_KEY secret");
  }
  const raw = await new Response(message.raw).arrayBuffer();
  const url = env.MAILSINK_URL.replace(/\/+$/, "") + "/v1/inbound";
  const resp = await fetchImpl(url, {
    method: "POST",
    headers: {
      "Authorization": "Bearer " + env.MAILSINK_API_KEY,
      "Content-Type": "message/rfc822",
      "X-Envelope-From": message.from,
      "X-Envelope-To": message.to,
    },
    body: raw,
  });
  if (resp.ok) {
    return { stored: true, status: resp.status };
  }
  const reason = await errorText(resp);
  if (PERMANENT.has(resp.status)) {
    message.setReject(`mailsink refused the message (${resp.status}): ${reason}`);
    return { stored: false, status: resp.status, reason };
  }
  throw new Error(`mailsink answered ${resp.status}: ${reason}; the sender will retry`);
}

// The statuses that will not change on a retry of the same message.
const PERMANENT = new Set([400, 409, 413, 422]);

// errorText reads mailsink's error body: {"error": "..."} or a validation
// error {"error": {"formErrors": [...], "fieldErrors": {...}}}.
async function errorText(resp) {
  const text = await resp.text();
  try {
    const { error } = JSON.parse(text);
    if (typeof error === "string") return error;
    const parts = [...(error.formErrors || [])];
    for (const [field, msgs] of Object.entries(error.fieldErrors || {})) {
      parts.push(`${field}: ${msgs.join(", ")}`);
    }
    return parts.join("; ") || text;
  } catch {
    return text.slice(0, 200);
  }
}

export default {
  async email(message, env) {
    await forward(message, env);
  },
};
