// Generated from the mailsink OpenAPI document by scripts/gen-types.js. Do not edit.
// mailsink API 1.0.0

export type Status = "received" | "processed" | "archived";

export type Account = {
  id: string;
  slug: string;
  name: string;
};

export type EmailSummary = {
  id: string;
  account: Account | null;
  messageId: string | null;
  sender: string;
  recipient: string;
  subject: string | null;
  status: Status;
  notes: string | null;
  labels: Array<string>;
  rawSize: number;
  receivedAt: string;
  createdAt: string;
  updatedAt: string;
};

export type EmailDetail = EmailSummary & {
  body: StoredEmailBody | null;
};

export type StoredEmailBody = {
  raw: string;
  text: string | null;
  html: string | null;
  headers: Record<string, string>;
  attachments: Array<StoredEmailAttachment>;
  /** An added field (SPEC.md's are unchanged): what the parser's limits left out of text, html, headers and attachments; empty when nothing. The raw source is always whole. */
  truncated?: Array<Truncation>;
};

export type Truncation = {
  /** headerFields: a header (the message's or a part's) had more fields than limit; only the first are read. parts: the message had more MIME entities than limit; the ones after them are not read. depth: multiparts nested deeper than limit; the deeper ones are not read. */
  what: "headerFields" | "parts" | "depth";
  limit: number;
};

export type StoredEmailAttachment = {
  contentId: string | null;
  contentType: string | null;
  disposition: string | null;
  filename: string | null;
  size: number;
};

export type ListResponse = {
  items: Array<EmailSummary>;
};

export type SingleEmailResponse = {
  item: EmailSummary;
};

export type DetailResponse = {
  item: EmailDetail;
};

export type CountResponse = {
  count: number;
};

export type EmailLink = {
  /** An absolute http or https URL with a host, or a mailto URL, as written in the message (entities decoded; tabs, newlines and surrounding spaces removed). */
  url: string;
  /** For an HTML link, what a reader sees: the anchor's text (script and style left out) with white space collapsed, or else the alt text of its images (of an area: its alt); null when empty and for links of the text part. */
  text: string | null;
};

export type LinksResponse = {
  items: Array<EmailLink>;
};

export type EmailCode = {
  /** The code as a person types it: digits, or upper-case letters and digits, with the spaces and dashes that split it in the message removed ("123 456" gives "123456", "ABC-DEF" gives "ABCDEF"). */
  value: string;
};

export type CodesResponse = {
  items: Array<EmailCode>;
};

/** A split of email clients in percent. */
export type CheckScore = {
  supported: number;
  partial: number;
  unsupported: number;
};

/** One email client family on one platform, at the latest version the caniemail data has tested. */
export type EmailClientSupport = {
  /** caniemail's family key, like gmail or outlook. */
  family: string;
  familyName: string;
  /** caniemail's platform key, like ios or windows. */
  platform: string;
  platformName: string;
  version: string;
  /** The data's notes on this client's support, Markdown. */
  notes: Array<string>;
};

export type HTMLCompatWarning = {
  /** The caniemail slug, like css-display-flex or html-video. */
  feature: string;
  title: string;
  category: "html" | "css" | "image" | "others";
  url: string;
  /** The places the HTML uses the feature. */
  occurrences: number;
  score: CheckScore;
  /** The clients that do not support it. */
  unsupported: Array<EmailClientSupport>;
  /** The clients that support it in part. */
  partial: Array<EmailClientSupport>;
  /** The data's note on the feature as a whole. */
  notes: string | null;
};

export type HTMLCheckResponse = {
  /** The features the HTML part uses that some client lacks or supports in part, the worst first. */
  warnings: Array<HTMLCompatWarning>;
  /** The message's score as Mailpit computes its own: each feature's share of unsupported (and partly supported) clients weighted by the share of the HTML's elements that use it; the largest of each is the message's, and the rest is supported. */
  total: CheckScore & {
    /** The HTML's elements. */
    nodes: number;
    /** The caniemail features the HTML uses, supported everywhere or not. */
    features: number;
    /** The clients (family and platform) the data knows. */
    clients: number;
  };
  data: {
    source: string;
    /** The date of the bundled caniemail data, YYYY-MM-DD. */
    updated: string;
  };
  checkedAt: string;
};

export type LinkCheckItem = {
  url: string;
  kind: "link" | "image";
  /** The HTTP status of the last hop; null when there was no answer (error says why), and for targets the SSRF rules refuse. */
  status: number | null;
  /** The URL of the last hop, after redirects. */
  finalUrl: string | null;
  redirects: number;
  /** GET when HEAD was refused (405, 501). */
  method: "HEAD" | "GET";
  timeMs: number;
  /** Why there is no status: refused by the SSRF rules (saying which setting allows it), no answer within 5 s, too many redirects, a network or TLS error. */
  error: string | null;
};

export type LinkCheckResponse = {
  items: Array<LinkCheckItem>;
  /** URLs past the first 100, not fetched. */
  omitted: number;
  checkedAt: string;
};

export type SpamRule = {
  name: string;
  score: number;
  description: string;
};

export type SpamCheckResponse = {
  score: number;
  threshold: number;
  isSpam: boolean;
  /** The SpamAssassin rules that hit. */
  rules: Array<SpamRule>;
  scoredBytes: number;
  /** The message is over 500 KB and was scored on its first 500 KB, as spamc does. */
  truncated: boolean;
  checkedAt: string;
};

export type AuthResult = "pass" | "fail" | "softfail" | "neutral" | "none" | "temperror" | "permerror";

export type DKIMResult = {
  /** The signature's d=. */
  domain: string;
  /** The signature's s=; the key is the TXT record of selector._domainkey.domain. */
  selector: string;
  result: AuthResult;
  reason: string;
};

/** Evaluated when the check runs, from the SMTP transcript's client address (after trusted proxies), HELO and MAIL FROM; none for mail that did not come over SMTP. */
export type SPFResult = {
  result: AuthResult;
  /** MAIL FROM's domain, or HELO's for a null sender. */
  domain: string;
  clientIp: string;
  helo: string;
  mailFrom: string;
  reason: string;
};

export type DMARCResult = {
  result: AuthResult;
  /** The From header's domain. */
  domain: string;
  /** The domain whose record applies: domain's, else its organisational domain's. */
  policyDomain: string;
  /** p= (or sp= for a subdomain): none, quarantine or reject; empty without a record. */
  policy: string;
  dkimAligned: boolean;
  spfAligned: boolean;
  reason: string;
};

export type AuthCheckResponse = {
  dkim: Array<DKIMResult>;
  /** Signatures past the first 5, not verified. */
  dkimIgnored: number;
  spf: SPFResult;
  dmarc: DMARCResult;
  checkedAt: string;
};

export type BulkDeleteResponse = {
  deleted: number;
};

export type ErrorResponse = {
  error: string;
};

export type ValidationErrorResponse = {
  error: {
    formErrors: Array<string>;
    fieldErrors: Record<string, Array<string>>;
  };
};

export type MessageResponse = {
  message: string;
};

export type HealthResponse = {
  ok: true;
};

export type CreateEmailRequest = {
  recipient: string;
  sender: string;
  subject?: string | null;
  text?: string | null;
  html?: string | null;
  /** Raw RFC 5322 source; at most MAILSINK_MAX_MESSAGE_BYTES bytes (413 above). */
  raw?: string;
  headers?: Record<string, string>;
  receivedAt?: string;
};

export type UpdateEmailRequest = {
  labels?: Array<string>;
  notes?: string | null;
  status?: Status;
  subject?: string | null;
};

export type SMTPCommand = {
  /** The address as the client gave it. */
  address: string;
  /** ESMTP parameters the server understood, like SIZE=1234 or BODY=8BITMIME. */
  params: Array<string>;
  /** The reply line the client got, like 250 2.0.0 ... */
  reply: string;
};

/** The SMTP transaction that delivered the email, as the server saw it. Never holds a password or API key. RCPT commands routed to other accounts are left out; at most 100 RCPT commands are kept (rcptOmitted counts the rest). */
export type Transcript = {
  /** host:port of the client. */
  clientAddress: string;
  /** The name given in EHLO or HELO. */
  helo: string;
  /** Like TLS 1.3; empty without TLS. */
  tlsVersion: string;
  /** Like TLS_AES_128_GCM_SHA256; empty without TLS. */
  tlsCipher: string;
  /** PLAIN or LOGIN; empty without AUTH. */
  authMechanism: string;
  /** The user name given with AUTH (the password, an API key, is never kept); empty without AUTH. */
  authIdentity: string;
  mail: SMTPCommand;
  rcpt: Array<SMTPCommand>;
  rcptOmitted?: number;
  /** The reply to the message. */
  data: string;
};

export type TranscriptResponse = {
  /** null for an email that did not arrive over SMTP (created with POST /v1/emails or /v1/inbound). */
  item: Transcript | null;
};

/** auth: the reply to a successful AUTH (only when the client authenticates with an API key). mail: the reply to MAIL FROM (with AUTH, or when a single account is configured). rcpt: the reply to RCPT TO. data: before the message is read: the reply to DATA, in place of its 354, or to the first BDAT chunk (over TLS, and when some of the message has come in before the answer, from a client that does not wait for the 354, DATA gets its 354 and the reply follows the message, which is read and dropped; what such a client sends after the refusal is read as commands, as by any server that refuses DATA). message: after the whole message was read, before it is stored. */
export type FaultStage = "auth" | "mail" | "rcpt" | "data" | "message";

export type FaultReply = {
  code: number;
  /** Printable ASCII on one line. A leading enhanced status code of the reply's class (4.3.0 ...) is used as such; without one the server adds X.0.0. */
  text?: string;
};

/** At least one of reply, delay and disconnect; reply and disconnect exclude each other. Without count and probability the rule applies to every matching transaction until it expires or is deleted. */
export type FaultRuleRequest = {
  stage: FaultStage;
  reply?: FaultReply;
  /** A Go duration (1.5s, 2m) waited before the reply: above 0 and at most 4m, and below MAILSINK_SMTP_READ_TIMEOUT by a tenth of it (at least 1s). */
  delay?: string;
  /** Close the connection without a reply. */
  disconnect?: boolean;
  /** Only transactions with this recipient (an address, or @domain for every address at exactly that domain). Not at the auth and mail stages. */
  recipient?: string;
  /** Only transactions with this MAIL FROM (an address or @domain). Not at the auth stage. */
  sender?: string;
  /** Apply to the next count matching commands only, exactly, across every replica; the rule is deleted after its last. */
  count?: number;
  /** The chance that a matching command is hit. */
  probability?: number;
  /** A Go duration after which the rule no longer applies (at most 720h). */
  expiresIn?: string;
};

export type FaultRule = {
  id: string;
  stage: FaultStage;
  reply: FaultReply | null;
  delay: string | null;
  disconnect: boolean;
  recipient: string | null;
  sender: string | null;
  count: number | null;
  /** For counted rules, the matches left. */
  remaining: number | null;
  probability: number | null;
  createdAt: string;
  expiresAt: string | null;
};

export type FaultRuleResponse = {
  item: FaultRule;
};

export type FaultRuleListResponse = {
  items: Array<FaultRule>;
};

/** Set filters combine with AND; a webhook with filters gets no email.deleted events (they carry no email to match). */
export type WebhookFilters = {
  /** Exact recipient address, case-insensitive. */
  recipient: string | null;
  /** Exact sender address, case-insensitive. */
  sender: string | null;
  /** The subject contains the value, case-insensitive, literal. */
  subject: string | null;
};

export type Webhook = {
  id: string;
  url: string;
  events: Array<WebhookEventType>;
  filters: WebhookFilters;
  /** The signing secret: only in the answer to the creation. */
  secret?: string;
  status: "active" | "disabled";
  disabledAt: string | null;
  /** Why deliveries stopped: a delivery failed for MAILSINK_WEBHOOK_RETRY_FOR (24h), and how its last attempt failed. */
  disabledReason: string | null;
  createdAt: string;
};

export type WebhookEventType = "email.created" | "email.updated" | "email.deleted";

export type CreateWebhookRequest = {
  /** http or https; at most MAILSINK_WEBHOOK_MAX_URL_BYTES bytes. Link-local and metadata addresses are refused; private and loopback ones unless the account has webhooks.allowPrivateTargets. A host name is checked after DNS at every attempt. */
  url: string;
  events: Array<WebhookEventType>;
  filters?: {
    recipient?: string | null;
    sender?: string | null;
    subject?: string | null;
  } | null;
};

export type WebhookResponse = {
  item: Webhook;
};

export type WebhookListResponse = {
  items: Array<Webhook>;
};

export type WebhookDelivery = {
  /** The webhook-id header: the same on every attempt. */
  id: string;
  type: WebhookEventType;
  emailId: string;
  status: "pending" | "succeeded" | "failed";
  attempts: number;
  createdAt: string;
  lastAttemptAt: string | null;
  /** While pending: when the next attempt is due. */
  nextAttemptAt: string | null;
  /** The receiver's status at the last attempt; null when it did not answer. */
  statusCode: number | null;
  /** What went wrong at the last attempt. */
  error: string | null;
  /** At most the first 256 bytes of the receiver's last answer. */
  response: string | null;
};

export type WebhookDeliveryListResponse = {
  items: Array<WebhookDelivery>;
};

export type WebhookPayload = {
  type: WebhookEventType;
  timestamp: string;
  /** The email summary after the change; for email.deleted only what is known: its id and account. */
  data: EmailSummary | {
    id: string;
    account: Account | null;
  };
};

export type ReleaseRequest = {
  /** The envelope recipients (RCPT TO); each must match, whole and regardless of case, a pattern of the account's relay.allowedRecipients. An address given twice is sent to once. */
  to: Array<string>;
};

export type ReleaseReply = {
  /** The upstream's reply code to the message (250). */
  code: number;
  /** The upstream's reply text, its enhanced status code first when it gives one (2.0.0 OK: queued as ...). */
  text: string;
};

export type ReleaseResponse = {
  item: ReleaseReply;
};

export type ReleaseResult = {
  id: string;
  /** The upstream accepted the email. */
  released: boolean;
  /** The upstream's reply code for this email; null when it did not answer for it (not sent, or the connection failed). */
  code: number | null;
  /** Released: the upstream's reply text. Else why not: the upstream's refusal (the command it refused and its reply), the email was deleted meanwhile, the account's release rate was used up (the emails after it are not sent), or the connection to the upstream was lost (likewise). */
  text: string;
};

export type BulkReleaseResponse = {
  /** One result per selected email, in list order (newest first). */
  items: Array<ReleaseResult>;
};

export type EventData = {
  type: "email.created" | "email.updated" | "email.deleted";
  emailId: string;
  item?: EmailSummary;
};

/** The query parameters of each operation that takes some. */
export interface OperationQueries {
  /** GET /v1/emails */
  listEmails: {
    /** Page size. */
    limit?: number;
    /** Emails skipped. */
    offset?: number;
    /** Exact recipient address, case-insensitive. */
    recipient?: string;
    /** Exact sender address, case-insensitive. */
    sender?: string;
    /** Status. */
    status?: Status;
    /** Subject contains the value, case-insensitive, literal. */
    subject?: string;
    /** Only emails carrying this label: exact, case-sensitive. */
    label?: string;
    /** Only emails received after this instant (RFC 3339). */
    since?: string;
    /** Cursor: only emails after the email with this id in list order (receivedAt, then id, descending), whether or not that email matches the filters; offset then counts from it. Paging with the id of the last email seen neither skips nor repeats an email while new ones arrive. 404 when the account has no email with this id (also when it was deleted). Not with wait: new emails come before the cursor, never after it. */
    before?: string;
    /** Seconds to hold the request while the page is empty; it answers as soon as a matching email is stored, or 200 with no items when the time runs out. */
    wait?: number;
  };
  /** DELETE /v1/emails */
  deleteEmails: {
    /** Exact recipient address, case-insensitive. */
    recipient?: string;
    /** Exact sender address, case-insensitive. */
    sender?: string;
    /** Status. */
    status?: Status;
    /** Subject contains the value, case-insensitive, literal. */
    subject?: string;
    /** Only emails carrying this label: exact, case-sensitive. */
    label?: string;
    /** Only emails received after this instant (RFC 3339). */
    since?: string;
    /** Delete every email of the account when no filter is given. */
    all?: boolean;
  };
  /** GET /v1/emails/count */
  countEmails: {
    /** Exact recipient address, case-insensitive. */
    recipient?: string;
    /** Exact sender address, case-insensitive. */
    sender?: string;
    /** Status. */
    status?: Status;
    /** Subject contains the value, case-insensitive, literal. */
    subject?: string;
    /** Only emails carrying this label: exact, case-sensitive. */
    label?: string;
    /** Only emails received after this instant (RFC 3339). */
    since?: string;
    /** Cursor: only emails after the email with this id in list order (receivedAt, then id, descending), whether or not that email matches the filters; offset then counts from it. Paging with the id of the last email seen neither skips nor repeats an email while new ones arrive. 404 when the account has no email with this id (also when it was deleted). Not with wait: new emails come before the cursor, never after it. */
    before?: string;
  };
  /** POST /v1/emails/release */
  releaseEmails: {
    /** Page size. */
    limit?: number;
    /** Emails skipped. */
    offset?: number;
    /** Exact recipient address, case-insensitive. */
    recipient?: string;
    /** Exact sender address, case-insensitive. */
    sender?: string;
    /** Status. */
    status?: Status;
    /** Subject contains the value, case-insensitive, literal. */
    subject?: string;
    /** Only emails carrying this label: exact, case-sensitive. */
    label?: string;
    /** Only emails received after this instant (RFC 3339). */
    since?: string;
    /** Cursor: only emails after the email with this id in list order (receivedAt, then id, descending), whether or not that email matches the filters; offset then counts from it. Paging with the id of the last email seen neither skips nor repeats an email while new ones arrive. 404 when the account has no email with this id (also when it was deleted). Not with wait: new emails come before the cursor, never after it. */
    before?: string;
  };
  /** GET /v1/emails/{emailId}/checks/html */
  getEmailHTMLCheck: {
    /** 1 or true: run the check again instead of answering the kept result. */
    refresh?: "0" | "1" | "false" | "true";
  };
  /** GET /v1/emails/{emailId}/checks/links */
  getEmailLinkCheck: {
    /** 1 or true: run the check again instead of answering the kept result. */
    refresh?: "0" | "1" | "false" | "true";
  };
  /** GET /v1/emails/{emailId}/checks/spam */
  getEmailSpamCheck: {
    /** 1 or true: run the check again instead of answering the kept result. */
    refresh?: "0" | "1" | "false" | "true";
  };
  /** GET /v1/emails/{emailId}/checks/auth */
  getEmailAuthCheck: {
    /** 1 or true: run the check again instead of answering the kept result. */
    refresh?: "0" | "1" | "false" | "true";
  };
  /** GET /v1/events */
  streamEvents: {
    /** Same as the Last-Event-ID header. */
    lastEventId?: string;
  };
  /** GET /v1/webhooks/{webhookId}/deliveries */
  listWebhookDeliveries: {
    /** Page size. */
    limit?: number;
  };
}
