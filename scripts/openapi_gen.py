# Writes the OpenAPI 3.1 document of the API, served at /v1/openapi.json:
#   python3 scripts/openapi_gen.py > httpapi/openapi.json
# httpapi tests check real responses against it.
import json
def ref(n): return {"$ref": "#/components/schemas/"+n}
def nul(t, **kw): d={"type":[t,"null"]}; d.update(kw); return d
email_fmt={"type":"string","format":"email",
  "pattern":"^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+\\-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"}
uuid={"type":"string","pattern":"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|[fF]{8}-[fF]{4}-[fF]{4}-[fF]{4}-[fF]{12})$"}
dt={"type":"string","format":"date-time"}
status={"type":"string","enum":["received","processed","archived"]}
summary_props={
 "id":{**uuid},"account":{"oneOf":[ref("Account"),{"type":"null"}]},"messageId":nul("string"),
 "sender":{"type":"string"},"recipient":{"type":"string"},"subject":nul("string"),"status":ref("Status"),
 "notes":nul("string"),"labels":{"type":"array","items":{"type":"string"}},
 "rawSize":{"type":"integer","minimum":0,"maximum":9007199254740991},
 "receivedAt":dt,"createdAt":dt,"updatedAt":dt}
schemas={
 "Status":status,
 "Account":{"type":"object","required":["id","slug","name"],"properties":{"id":{"type":"string"},"slug":{"type":"string"},"name":{"type":"string"}}},
 "EmailSummary":{"type":"object","required":list(summary_props),"properties":summary_props},
 "EmailDetail":{"allOf":[ref("EmailSummary"),{"type":"object","required":["body"],"properties":{"body":{"oneOf":[ref("StoredEmailBody"),{"type":"null"}]}}}]},
 "StoredEmailBody":{"type":"object","required":["raw","text","html","headers","attachments"],"properties":{
   "raw":{"type":"string"},"text":nul("string"),"html":nul("string"),
   "headers":{"type":"object","additionalProperties":{"type":"string"}},
   "attachments":{"type":"array","items":ref("StoredEmailAttachment")},
   "truncated":{"type":"array","items":ref("Truncation"),"description":"An added field (SPEC.md's are unchanged): what the parser's limits left out of text, html, headers and attachments; empty when nothing. The raw source is always whole."}}},
 "Truncation":{"type":"object","required":["what","limit"],"properties":{
   "what":{"type":"string","enum":["headerFields","parts","depth"],"description":"headerFields: a header (the message's or a part's) had more fields than limit; only the first are read. parts: the message had more MIME entities than limit; the ones after them are not read. depth: multiparts nested deeper than limit; the deeper ones are not read."},
   "limit":{"type":"integer"}}},
 "StoredEmailAttachment":{"type":"object","required":["contentId","contentType","disposition","filename","size"],"properties":{
   "contentId":nul("string"),"contentType":nul("string"),"disposition":nul("string"),"filename":nul("string"),
   "size":{"type":"integer","minimum":0,"maximum":9007199254740991}}},
 "ListResponse":{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":ref("EmailSummary")}}},
 "SingleEmailResponse":{"type":"object","required":["item"],"properties":{"item":ref("EmailSummary")}},
 "DetailResponse":{"type":"object","required":["item"],"properties":{"item":ref("EmailDetail")}},
 "CountResponse":{"type":"object","required":["count"],"properties":{"count":{"type":"integer","minimum":0,"maximum":9007199254740991}}},
 "EmailLink":{"type":"object","required":["url","text"],"properties":{
   "url":{"type":"string","description":"An absolute http or https URL with a host, or a mailto URL, as written in the message (entities decoded; tabs, newlines and surrounding spaces removed)."},
   "text":{**nul("string"),"description":"For an HTML link, what a reader sees: the anchor's text (script and style left out) with white space collapsed, or else the alt text of its images (of an area: its alt); null when empty and for links of the text part."}}},
 "LinksResponse":{"type":"object","required":["items"],"properties":{"items":{"type":"array","maxItems":1000,"items":ref("EmailLink")}}},
 "EmailCode":{"type":"object","required":["value"],"properties":{
   "value":{"type":"string","minLength":4,"maxLength":15,"description":"The code as a person types it: digits, or upper-case letters and digits, with the spaces and dashes that split it in the message removed (\"123 456\" gives \"123456\", \"ABC-DEF\" gives \"ABCDEF\")."}}},
 "CodesResponse":{"type":"object","required":["items"],"properties":{"items":{"type":"array","maxItems":20,"items":ref("EmailCode")}}},
 "CheckScore":{"type":"object","required":["supported","partial","unsupported"],"description":"A split of email clients in percent.","properties":{
   "supported":{"type":"number","minimum":0,"maximum":100},"partial":{"type":"number","minimum":0,"maximum":100},"unsupported":{"type":"number","minimum":0,"maximum":100}}},
 "EmailClientSupport":{"type":"object","required":["family","familyName","platform","platformName","version","notes"],
   "description":"One email client family on one platform, at the latest version the caniemail data has tested.","properties":{
   "family":{"type":"string","description":"caniemail's family key, like gmail or outlook."},"familyName":{"type":"string"},
   "platform":{"type":"string","description":"caniemail's platform key, like ios or windows."},"platformName":{"type":"string"},
   "version":{"type":"string"},"notes":{"type":"array","items":{"type":"string"},"description":"The data's notes on this client's support, Markdown."}}},
 "HTMLCompatWarning":{"type":"object","required":["feature","title","category","url","occurrences","score","unsupported","partial","notes"],"properties":{
   "feature":{"type":"string","description":"The caniemail slug, like css-display-flex or html-video."},
   "title":{"type":"string"},"category":{"type":"string","enum":["html","css","image","others"]},"url":{"type":"string"},
   "occurrences":{"type":"integer","minimum":1,"description":"The places the HTML uses the feature."},
   "score":ref("CheckScore"),
   "unsupported":{"type":"array","items":ref("EmailClientSupport"),"description":"The clients that do not support it."},
   "partial":{"type":"array","items":ref("EmailClientSupport"),"description":"The clients that support it in part."},
   "notes":{**nul("string"),"description":"The data's note on the feature as a whole."}}},
 "HTMLCheckResponse":{"type":"object","required":["warnings","total","data","checkedAt"],"properties":{
   "warnings":{"type":"array","items":ref("HTMLCompatWarning"),"description":"The features the HTML part uses that some client lacks or supports in part, the worst first."},
   "total":{"allOf":[ref("CheckScore"),{"type":"object","required":["nodes","features","clients"],"properties":{
     "nodes":{"type":"integer","minimum":0,"description":"The HTML's elements."},
     "features":{"type":"integer","minimum":0,"description":"The caniemail features the HTML uses, supported everywhere or not."},
     "clients":{"type":"integer","minimum":0,"description":"The clients (family and platform) the data knows."}}}],
     "description":"The message's score as Mailpit computes its own: each feature's share of unsupported (and partly supported) clients weighted by the share of the HTML's elements that use it; the largest of each is the message's, and the rest is supported."},
   "data":{"type":"object","required":["source","updated"],"properties":{"source":{"type":"string"},"updated":{"type":"string","description":"The date of the bundled caniemail data, YYYY-MM-DD."}}},
   "checkedAt":dt}},
 "LinkCheckItem":{"type":"object","required":["url","kind","status","finalUrl","redirects","method","timeMs","error"],"properties":{
   "url":{"type":"string"},"kind":{"type":"string","enum":["link","image"]},
   "status":{**nul("integer"),"description":"The HTTP status of the last hop; null when there was no answer (error says why), and for targets the SSRF rules refuse."},
   "finalUrl":{**nul("string"),"description":"The URL of the last hop, after redirects."},
   "redirects":{"type":"integer","minimum":0,"maximum":10},
   "method":{"type":"string","enum":["HEAD","GET"],"description":"GET when HEAD was refused (405, 501)."},
   "timeMs":{"type":"integer","minimum":0},
   "error":{**nul("string"),"description":"Why there is no status: refused by the SSRF rules (saying which setting allows it), no answer within 5 s, too many redirects, a network or TLS error."}}},
 "LinkCheckResponse":{"type":"object","required":["items","omitted","checkedAt"],"properties":{
   "items":{"type":"array","maxItems":100,"items":ref("LinkCheckItem")},
   "omitted":{"type":"integer","minimum":0,"description":"URLs past the first 100, not fetched."},"checkedAt":dt}},
 "SpamRule":{"type":"object","required":["name","score","description"],"properties":{
   "name":{"type":"string"},"score":{"type":"number"},"description":{"type":"string"}}},
 "SpamCheckResponse":{"type":"object","required":["score","threshold","isSpam","rules","scoredBytes","truncated","checkedAt"],"properties":{
   "score":{"type":"number"},"threshold":{"type":"number"},"isSpam":{"type":"boolean"},
   "rules":{"type":"array","items":ref("SpamRule"),"description":"The SpamAssassin rules that hit."},
   "scoredBytes":{"type":"integer","minimum":0},
   "truncated":{"type":"boolean","description":"The message is over 500 KB and was scored on its first 500 KB, as spamc does."},"checkedAt":dt}},
 "AuthResult":{"type":"string","enum":["pass","fail","softfail","neutral","none","temperror","permerror"]},
 "DKIMResult":{"type":"object","required":["domain","selector","result","reason"],"properties":{
   "domain":{"type":"string","description":"The signature's d=."},"selector":{"type":"string","description":"The signature's s=; the key is the TXT record of selector._domainkey.domain."},
   "result":ref("AuthResult"),"reason":{"type":"string"}}},
 "SPFResult":{"type":"object","required":["result","domain","clientIp","helo","mailFrom","reason"],
   "description":"Evaluated when the check runs, from the SMTP transcript's client address (after trusted proxies), HELO and MAIL FROM; none for mail that did not come over SMTP.","properties":{
   "result":ref("AuthResult"),"domain":{"type":"string","description":"MAIL FROM's domain, or HELO's for a null sender."},
   "clientIp":{"type":"string"},"helo":{"type":"string"},"mailFrom":{"type":"string"},"reason":{"type":"string"}}},
 "DMARCResult":{"type":"object","required":["result","domain","policyDomain","policy","dkimAligned","spfAligned","reason"],"properties":{
   "result":ref("AuthResult"),"domain":{"type":"string","description":"The From header's domain."},
   "policyDomain":{"type":"string","description":"The domain whose record applies: domain's, else its organisational domain's."},
   "policy":{"type":"string","description":"p= (or sp= for a subdomain): none, quarantine or reject; empty without a record."},
   "dkimAligned":{"type":"boolean"},"spfAligned":{"type":"boolean"},"reason":{"type":"string"}}},
 "AuthCheckResponse":{"type":"object","required":["dkim","dkimIgnored","spf","dmarc","checkedAt"],"properties":{
   "dkim":{"type":"array","maxItems":5,"items":ref("DKIMResult")},
   "dkimIgnored":{"type":"integer","minimum":0,"description":"Signatures past the first 5, not verified."},
   "spf":ref("SPFResult"),"dmarc":ref("DMARCResult"),"checkedAt":dt}},
 "BulkDeleteResponse":{"type":"object","required":["deleted"],"properties":{"deleted":{"type":"integer","minimum":0}}},
 "ErrorResponse":{"type":"object","required":["error"],"properties":{"error":{"type":"string"}}},
 "ValidationErrorResponse":{"type":"object","required":["error"],"properties":{"error":{"type":"object","required":["formErrors","fieldErrors"],"properties":{
   "formErrors":{"type":"array","items":{"type":"string"}},
   "fieldErrors":{"type":"object","additionalProperties":{"type":"array","items":{"type":"string"}}}}}}},
 "MessageResponse":{"type":"object","required":["message"],"properties":{"message":{"type":"string"}}},
 "HealthResponse":{"type":"object","required":["ok"],"properties":{"ok":{"const":True}}},
 "CreateEmailRequest":{"type":"object","required":["recipient","sender"],"properties":{
   "recipient":email_fmt,"sender":email_fmt,"subject":nul("string",maxLength=998),"text":nul("string"),"html":nul("string"),
   "raw":{"type":"string","description":"Raw RFC 5322 source; at most MAILSINK_MAX_MESSAGE_BYTES bytes (413 above)."},
   "headers":{"type":"object","additionalProperties":{"type":"string"}},"receivedAt":dt}},
 "UpdateEmailRequest":{"type":"object","properties":{
   "labels":{"type":"array","maxItems":32,"items":{"type":"string","minLength":1,"maxLength":64}},
   "notes":nul("string",maxLength=10000),"status":ref("Status"),"subject":nul("string",maxLength=998)}},
 "SMTPCommand":{"type":"object","required":["address","params","reply"],"properties":{
   "address":{"type":"string","description":"The address as the client gave it."},
   "params":{"type":"array","items":{"type":"string"},"description":"ESMTP parameters the server understood, like SIZE=1234 or BODY=8BITMIME."},
   "reply":{"type":"string","description":"The reply line the client got, like 250 2.0.0 ..."}}},
 "Transcript":{"type":"object","required":["clientAddress","helo","tlsVersion","tlsCipher","authMechanism","authIdentity","mail","rcpt","data"],
   "description":"The SMTP transaction that delivered the email, as the server saw it. Never holds a password or API key. RCPT commands routed to other accounts are left out; at most 100 RCPT commands are kept (rcptOmitted counts the rest).",
   "properties":{
   "clientAddress":{"type":"string","description":"host:port of the client."},
   "helo":{"type":"string","description":"The name given in EHLO or HELO."},
   "tlsVersion":{"type":"string","description":"Like TLS 1.3; empty without TLS."},
   "tlsCipher":{"type":"string","description":"Like TLS_AES_128_GCM_SHA256; empty without TLS."},
   "authMechanism":{"type":"string","description":"PLAIN or LOGIN; empty without AUTH."},
   "authIdentity":{"type":"string","description":"The user name given with AUTH (the password, an API key, is never kept); empty without AUTH."},
   "mail":ref("SMTPCommand"),"rcpt":{"type":"array","maxItems":100,"items":ref("SMTPCommand")},
   "rcptOmitted":{"type":"integer","minimum":1},
   "data":{"type":"string","description":"The reply to the message."}}},
 "TranscriptResponse":{"type":"object","required":["item"],"properties":{"item":{"oneOf":[ref("Transcript"),{"type":"null"}],
   "description":"null for an email that did not arrive over SMTP (created with POST /v1/emails or /v1/inbound)."}}},
 "FaultStage":{"type":"string","enum":["auth","mail","rcpt","data","message"],
   "description":"auth: the reply to a successful AUTH (only when the client authenticates with an API key). mail: the reply to MAIL FROM (with AUTH, or when a single account is configured). rcpt: the reply to RCPT TO. data: before the message is read: the reply to DATA, in place of its 354, or to the first BDAT chunk (over TLS, and when some of the message has come in before the answer, from a client that does not wait for the 354, DATA gets its 354 and the reply follows the message, which is read and dropped; what such a client sends after the refusal is read as commands, as by any server that refuses DATA). message: after the whole message was read, before it is stored."},
 "FaultReply":{"type":"object","required":["code"],"additionalProperties":False,"properties":{
   "code":{"type":"integer","minimum":400,"maximum":599},
   "text":{"type":"string","maxLength":200,"pattern":"^[ -~]*$","description":"Printable ASCII on one line. A leading enhanced status code of the reply's class (4.3.0 ...) is used as such; without one the server adds X.0.0."}}},
 "FaultRuleRequest":{"type":"object","required":["stage"],"additionalProperties":False,
   "description":"At least one of reply, delay and disconnect; reply and disconnect exclude each other. Without count and probability the rule applies to every matching transaction until it expires or is deleted.",
   "properties":{
   "stage":ref("FaultStage"),"reply":ref("FaultReply"),
   "delay":{"type":"string","description":"A Go duration (1.5s, 2m) waited before the reply: above 0 and at most 4m, and below MAILSINK_SMTP_READ_TIMEOUT by a tenth of it (at least 1s)."},
   "disconnect":{"type":"boolean","description":"Close the connection without a reply."},
   "recipient":{"type":"string","description":"Only transactions with this recipient (an address, or @domain for every address at exactly that domain). Not at the auth and mail stages."},
   "sender":{"type":"string","description":"Only transactions with this MAIL FROM (an address or @domain). Not at the auth stage."},
   "count":{"type":"integer","minimum":1,"maximum":1000000,"description":"Apply to the next count matching commands only, exactly, across every replica; the rule is deleted after its last."},
   "probability":{"type":"number","minimum":0,"maximum":1,"description":"The chance that a matching command is hit."},
   "expiresIn":{"type":"string","description":"A Go duration after which the rule no longer applies (at most 720h)."}}},
 "FaultRule":{"type":"object","required":["id","stage","reply","delay","disconnect","recipient","sender","count","remaining","probability","createdAt","expiresAt"],"properties":{
   "id":uuid,"stage":ref("FaultStage"),"reply":{"oneOf":[ref("FaultReply"),{"type":"null"}]},
   "delay":nul("string"),"disconnect":{"type":"boolean"},"recipient":nul("string"),"sender":nul("string"),
   "count":nul("integer",minimum=1),"remaining":{**nul("integer",minimum=0),"description":"For counted rules, the matches left."},
   "probability":nul("number",minimum=0,maximum=1),"createdAt":dt,"expiresAt":{"oneOf":[dt,{"type":"null"}]}}},
 "FaultRuleResponse":{"type":"object","required":["item"],"properties":{"item":ref("FaultRule")}},
 "FaultRuleListResponse":{"type":"object","required":["items"],"properties":{"items":{"type":"array","maxItems":100,"items":ref("FaultRule")}}},
 "WebhookFilters":{"type":"object","required":["recipient","sender","subject"],"description":"Set filters combine with AND; a webhook with filters gets no email.deleted events (they carry no email to match).","properties":{
   "recipient":{**nul("string"),"description":"Exact recipient address, case-insensitive."},
   "sender":{**nul("string"),"description":"Exact sender address, case-insensitive."},
   "subject":{**nul("string"),"description":"The subject contains the value, case-insensitive, literal."}}},
 "Webhook":{"type":"object","required":["id","url","events","filters","status","disabledAt","disabledReason","createdAt"],"properties":{
   "id":{**uuid},"url":{"type":"string"},
   "events":{"type":"array","minItems":1,"items":ref("WebhookEventType")},
   "filters":ref("WebhookFilters"),
   "secret":{"type":"string","pattern":"^whsec_[A-Za-z0-9+/=]+$","description":"The signing secret: only in the answer to the creation."},
   "status":{"type":"string","enum":["active","disabled"]},
   "disabledAt":nul("string",format="date-time"),
   "disabledReason":{**nul("string"),"description":"Why deliveries stopped: a delivery failed for MAILSINK_WEBHOOK_RETRY_FOR (24h), and how its last attempt failed."},
   "createdAt":dt}},
 "WebhookEventType":{"type":"string","enum":["email.created","email.updated","email.deleted"]},
 "CreateWebhookRequest":{"type":"object","required":["url","events"],"properties":{
   "url":{"type":"string","maxLength":2048,"description":"http or https; at most MAILSINK_WEBHOOK_MAX_URL_BYTES bytes. Link-local and metadata addresses are refused; private and loopback ones unless the account has webhooks.allowPrivateTargets. A host name is checked after DNS at every attempt."},
   "events":{"type":"array","minItems":1,"items":ref("WebhookEventType")},
   "filters":{"type":["object","null"],"properties":{"recipient":nul("string"),"sender":nul("string"),"subject":nul("string",maxLength=200)}}}},
 "WebhookResponse":{"type":"object","required":["item"],"properties":{"item":ref("Webhook")}},
 "WebhookListResponse":{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":ref("Webhook")}}},
 "WebhookDelivery":{"type":"object","required":["id","type","emailId","status","attempts","createdAt","lastAttemptAt","nextAttemptAt","statusCode","error","response"],"properties":{
   "id":{"type":"string","description":"The webhook-id header: the same on every attempt."},
   "type":ref("WebhookEventType"),"emailId":{"type":"string"},
   "status":{"type":"string","enum":["pending","succeeded","failed"]},
   "attempts":{"type":"integer","minimum":0},"createdAt":dt,
   "lastAttemptAt":nul("string",format="date-time"),
   "nextAttemptAt":{**nul("string",format="date-time"),"description":"While pending: when the next attempt is due."},
   "statusCode":{**nul("integer"),"description":"The receiver's status at the last attempt; null when it did not answer."},
   "error":{**nul("string"),"description":"What went wrong at the last attempt."},
   "response":{**nul("string",maxLength=256),"description":"At most the first 256 bytes of the receiver's last answer."}}},
 "WebhookDeliveryListResponse":{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":ref("WebhookDelivery")}}},
 "WebhookPayload":{"type":"object","required":["type","timestamp","data"],"properties":{
   "type":ref("WebhookEventType"),"timestamp":dt,
   "data":{"oneOf":[ref("EmailSummary"),{"type":"object","required":["id","account"],"properties":{"id":{"type":"string"},"account":{"oneOf":[ref("Account"),{"type":"null"}]}}}],
     "description":"The email summary after the change; for email.deleted only what is known: its id and account."}}},
 "ReleaseRequest":{"type":"object","required":["to"],"properties":{
   "to":{"type":"array","minItems":1,"maxItems":50,"items":email_fmt,"description":"The envelope recipients (RCPT TO); each must match, whole and regardless of case, a pattern of the account's relay.allowedRecipients. An address given twice is sent to once."}}},
 "ReleaseReply":{"type":"object","required":["code","text"],"properties":{
   "code":{"type":"integer","minimum":200,"maximum":599,"description":"The upstream's reply code to the message (250)."},
   "text":{"type":"string","description":"The upstream's reply text, its enhanced status code first when it gives one (2.0.0 OK: queued as ...)."}}},
 "ReleaseResponse":{"type":"object","required":["item"],"properties":{"item":ref("ReleaseReply")}},
 "ReleaseResult":{"type":"object","required":["id","released","code","text"],"properties":{
   "id":{**uuid},
   "released":{"type":"boolean","description":"The upstream accepted the email."},
   "code":{**nul("integer",minimum=200,maximum=599),"description":"The upstream's reply code for this email; null when it did not answer for it (not sent, or the connection failed)."},
   "text":{"type":"string","description":"Released: the upstream's reply text. Else why not: the upstream's refusal (the command it refused and its reply), the email was deleted meanwhile, the account's release rate was used up (the emails after it are not sent), or the connection to the upstream was lost (likewise)."}}},
 "BulkReleaseResponse":{"type":"object","required":["items"],"properties":{"items":{"type":"array","maxItems":100,"items":ref("ReleaseResult"),
   "description":"One result per selected email, in list order (newest first)."}}},
 "EventData":{"type":"object","required":["type","emailId"],"properties":{
   "type":{"type":"string","enum":["email.created","email.updated","email.deleted"]},
   "emailId":{"type":"string"},"item":ref("EmailSummary")}},
}
def j(s): return {"content":{"application/json":{"schema":ref(s)}}}
resp={
 "BadRequest":{"description":"Validation error: query, body or path parameter invalid.",**j("ValidationErrorResponse")},
 "Unauthorized":{"description":"API key missing or invalid.",**j("ErrorResponse")},
 "NotFound":{"description":"No such email in the key's account.",**j("ErrorResponse")},
 "TooLarge":{"description":"Request body over the size limit.",**j("ErrorResponse")},
 "Conflict":{"description":"The Idempotency-Key was used for a different request.",**j("ErrorResponse")},
 "TooManyRequests":{"description":"Too many held requests (wait, event streams) for the account.",**j("ErrorResponse")},
 "Conflict":{"description":"The request clashes with stored state (the account has the most webhooks it may have).",**j("ErrorResponse")},
 "Unavailable":{"description":"The store is unavailable for now, or (reads of an email's content) the read budget had no room for this read within MAILSINK_READ_WAIT, with Retry-After; retry.",**j("ErrorResponse")},
 "TooManyWrites":{"description":"The account's quota is reached (MAILSINK_QUOTA_MAX_EMAILS, MAILSINK_QUOTA_MAX_BYTES, or its quota in the accounts file; on requests that store), or the request body found no room in time: too many bodies being read at once from this address, for this account or in all (64 MiB of first MiBs; past 1 MiB, MAILSINK_SMTP_MAX_LARGE_TRANSFERS turns). Retry-After says when to try again.",**j("ErrorResponse")},
 "Conflict":{"description":"The request clashes with stored state.",**j("ErrorResponse")},
 "NoRelay":{"description":"The account has no relay: release needs a relay entry for the account in the accounts file.",**j("ErrorResponse")},
 "ReleaseLimited":{"description":"The account has released MAILSINK_RELEASE_PER_MINUTE emails in the last minute, or has 4 releases under way; Retry-After says when to try again. Nothing was sent.",**j("ErrorResponse")},
 "Upstream":{"description":"The upstream refused the message (the error names the command and gives its reply, like 550 5.1.1 ...), or could not be reached, TLS or AUTH failed, or it did not answer within MAILSINK_RELEASE_TIMEOUT. Nothing was delivered.",**j("ErrorResponse")},
}
def r(n): return {"$ref":"#/components/responses/"+n}
def q(name, schema, desc): return {"name":name,"in":"query","required":False,"schema":schema,"description":desc}
filters=[
 q("recipient",email_fmt,"Exact recipient address, case-insensitive."),
 q("sender",email_fmt,"Exact sender address, case-insensitive."),
 q("status",ref("Status"),"Status."),
 q("subject",{"type":"string","minLength":1,"maxLength":255},"Subject contains the value, case-insensitive, literal."),
 q("label",{"type":"string","minLength":1,"maxLength":64},"Only emails carrying this label: exact, case-sensitive."),
 q("since",dt,"Only emails received after this instant (RFC 3339)."),
]
before=q("before",uuid,"Cursor: only emails after the email with this id in list order (receivedAt, then id, descending), whether or not that email matches the filters; offset then counts from it. Paging with the id of the last email seen neither skips nor repeats an email while new ones arrive. 404 when the account has no email with this id (also when it was deleted). Not with wait: new emails come before the cursor, never after it.")
page=[q("limit",{"type":"integer","minimum":1,"maximum":100,"default":25},"Page size."),
      q("offset",{"type":"integer","minimum":0,"maximum":9007199254740991,"default":0},"Emails skipped.")]
wait=q("wait",{"type":"integer","minimum":1,"maximum":60},"Seconds to hold the request while the page is empty; it answers as soon as a matching email is stored, or 200 with no items when the time runs out.")
emailId={"name":"emailId","in":"path","required":True,"schema":uuid}
refresh=q("refresh",{"type":"string","enum":["0","1","false","true"]},"1 or true: run the check again instead of answering the kept result.")
idem={"name":"Idempotency-Key","in":"header","required":False,"schema":{"type":"string","minLength":1,"maxLength":255,"pattern":"^[ -~]+$"},
  "description":"Names this delivery: a repeat with the same key (per account, for 24 hours) answers as the first did and stores nothing new; the same key with another request is 409. Without it, the same request stores again (sending a message twice on purpose is allowed)."}
sec=[{"bearer":[]},{"apiKey":[]}]
std=lambda **kw: {"400":r("BadRequest"),"401":r("Unauthorized"),"503":r("Unavailable"),**kw}
# Every /v1/inbound route also takes the API key as a Basic auth password
# (any user name): providers can only put credentials in the URL.
inbound_sec=sec+[{"basic":[]}]
def refused(status, why):
  # A 400 comes in the validation envelope, the message its one form error.
  return {"description":"Refused for good ("+why+"): the provider does not retry. The message says why; nothing is stored.",**j("ValidationErrorResponse" if status=="400" else "ErrorResponse")}
def provider(op, summary, description, content, no_retry, extra=None):
  ok={"description":"Stored (one email per envelope recipient), or a retry of a stored delivery: nothing new is stored and the stored emails are answered. The answer lists the emails in the key's account only: those stored in another account (a recipient at a domain it lists) are left out.",**j("ListResponse")}
  if extra: ok=extra
  return {"post":{"operationId":op,"summary":summary,"description":description,"security":inbound_sec,
    "requestBody":{"required":True,"content":content},
    "responses":{"200":ok,no_retry[0]:refused(*no_retry),"401":r("Unauthorized"),
      "503":{"description":"Not stored for now, and retried by the provider: the store is unavailable, an account of the delivery is over its quota, or too many request bodies are being read at once.",**j("ErrorResponse")}}}}
form={"multipart/form-data":{"schema":{"type":"object"}},"application/x-www-form-urlencoded":{"schema":{"type":"object"}}}
mailgun=("Mailgun route forward(): the parsed message (message-headers, body-plain, body-html, attachment-N), or the raw MIME in body-mime "
  "when the URL ends in /mime. With the account's inbound.mailgunSigningKey, timestamp, token and signature (hex HMAC-SHA256 of timestamp+token) "
  "must verify and the timestamp be at most 12 hours old; a token seen before with other content is refused. The token names the delivery: a retry stores nothing new.")
provider_paths={
 "/v1/inbound/mailgun":provider("inboundMailgun","Store a message a Mailgun route forwards.",mailgun,form,("406","malformed request, bad signature, replayed token, too large")),
 "/v1/inbound/mailgun/mime":provider("inboundMailgunMime","Store a message a Mailgun route forwards (raw MIME).",mailgun,form,("406","malformed request, bad signature, replayed token, too large")),
 "/v1/inbound/sendgrid":provider("inboundSendGrid","Store a message of SendGrid's Inbound Parse webhook.",
   "Raw (email, when \"POST the raw, full MIME message\" is on) or parsed (headers, text, html, attachment-info, attachmentN); envelope in the envelope field. With the account's inbound.sendgridVerificationKey, X-Twilio-Email-Event-Webhook-Signature must be the ECDSA signature of X-Twilio-Email-Event-Webhook-Timestamp followed by the body. SendGrid sends no delivery id: an Idempotency-Key header, when given, names the delivery.",
   {"multipart/form-data":{"schema":{"type":"object"}}},("400","malformed request, bad signature, too large")),
 "/v1/inbound/postmark":provider("inboundPostmark","Store a message of Postmark's inbound webhook.",
   "Raw (RawEmail, when raw content is included) or parsed (FromFull, ToFull, CcFull, Headers, TextBody, HtmlBody, Attachments in base64). The recipient is OriginalRecipient; MessageID names the delivery.",
   {"application/json":{"schema":{"type":"object"}}},("403","malformed JSON, undecodable attachment, too large")),
 "/v1/inbound/ses":provider("inboundSES","Store a message of an Amazon SES receipt rule's SNS action, or confirm the SNS subscription.",
   "An SNS message (x-amz-sns-message-type header). Its topic must be one of the account's inbound.snsTopicArns and its signature (SignatureVersion 1 or 2) verify with the certificate at SigningCertURL (https://sns.<region>.amazonaws.com[.cn]/...pem only) or MAILSINK_SNS_SIGNING_CERT_FILE. A SubscriptionConfirmation is confirmed by fetching its SubscribeURL (same host rule). The SNS MessageId names the delivery.",
   {"text/plain":{"schema":{"type":"string"}},"application/json":{"schema":{"type":"object"}}},("400","malformed message, bad signature or certificate URL, unknown topic, S3 action, too large"),
   {"description":"Stored (ListResponse), a retry of a stored delivery, or a message with nothing to store (MessageResponse: a confirmed subscription, SES's set-up notification).",
    "content":{"application/json":{"schema":{"oneOf":[ref("ListResponse"),ref("MessageResponse")]}}}}),
}
paths={
 "/v1/emails":{
  "get":{"operationId":"listEmails","summary":"List the account's emails, newest first (receivedAt, then id, descending).","security":sec,
    "description":"Filters combine with AND. The subject and label filters are tested on each email's metadata, so their cost grows with the emails examined; the others use indexes.",
    "parameters":page+filters+[before,wait],
    "responses":std(**{"200":{"description":"A page of emails.",**j("ListResponse")},"404":r("NotFound"),"429":r("TooManyRequests")})},
  "post":{"operationId":"createEmail","summary":"Store a new email.","security":sec,
    "parameters":[idem],
    "requestBody":{"required":True,"content":{"application/json":{"schema":ref("CreateEmailRequest")}}},
    "responses":std(**{"201":{"description":"Created.",**j("SingleEmailResponse")},"409":r("Conflict"),"413":r("TooLarge"),"429":r("TooManyWrites")})},
  "delete":{"operationId":"deleteEmails","summary":"Delete the account's emails matching the filters (at least one filter, or all=true).","security":sec,
    "description":"Takes the filters of list; limit, offset, wait and before are refused (400).",
    "parameters":filters+[q("all",{"type":"boolean"},"Delete every email of the account when no filter is given.")],
    "responses":std(**{"200":{"description":"How many were deleted.",**j("BulkDeleteResponse")}})}},
 "/v1/emails/count":{
  "get":{"operationId":"countEmails","summary":"How many of the account's emails the list filters select.","security":sec,
    "description":"Takes the filters of list, before included; limit, offset and wait are refused (400). Without filters the count is read from the account's totals; with the subject or label filter, or several filters, every candidate email is examined, so the cost grows with the account's emails.",
    "parameters":filters+[before],
    "responses":std(**{"200":{"description":"The number of matching emails.",**j("CountResponse")},"404":r("NotFound")})}},
 "/v1/emails/{emailId}":{"parameters":[emailId],
  "get":{"operationId":"getEmail","summary":"Metadata and stored body of one email.","security":sec,
    "responses":std(**{"200":{"description":"The email.",**j("DetailResponse")},"404":r("NotFound")})},
  "patch":{"operationId":"updateEmail","summary":"Update labels, notes, status or subject.","security":sec,
    "requestBody":{"required":True,"content":{"application/json":{"schema":ref("UpdateEmailRequest")}}},
    "responses":std(**{"200":{"description":"The updated email.",**j("SingleEmailResponse")},"404":r("NotFound")})},
  "delete":{"operationId":"deleteEmail","summary":"Delete the email and its stored body.","security":sec,
    "responses":std(**{"204":{"description":"Deleted."},"404":r("NotFound")})}},
 "/v1/emails/{emailId}/release":{"parameters":[emailId],
  "post":{"operationId":"releaseEmail","summary":"Send the email, its raw source as stored, to real recipients through the account's relay (the accounts file's relay entry).","security":sec,
    "description":"The raw source goes byte-exact as SMTP DATA (CRLF line ends: a source with bare LF line ends is sent with CRLF ones; dot-stuffing is SMTP's) with MAIL FROM the relay's from, else the email's sender. Nothing is sent unless the upstream accepts every recipient. Nothing about the email changes. Each release is logged (without credentials) and counted in mailsink_releases_total.",
    "requestBody":{"required":True,"content":{"application/json":{"schema":ref("ReleaseRequest")}}},
    "responses":std(**{"200":{"description":"The upstream accepted the message: its reply.",**j("ReleaseResponse")},
      "400":{"description":"Validation error: the path id, the body, or a recipient the relay's allowedRecipients does not allow (fieldErrors.to names it); nothing was sent.",**j("ValidationErrorResponse")},
      "404":r("NotFound"),"409":r("NoRelay"),"429":r("ReleaseLimited"),"502":r("Upstream")})}},
 "/v1/emails/release":{
  "post":{"operationId":"releaseEmails","summary":"Send the emails the list's filters select (one page: limit, at most 100) to real recipients through the account's relay, over one connection.","security":sec,
    "description":"Selects exactly what GET /v1/emails with the same query lists (default limit 25); page on with before set to the last id released. Any other query parameter is refused (400), so that a filter this endpoint does not know never widens a release. Each email is sent as POST /v1/emails/{emailId}/release sends it; one the upstream refuses does not stop the others. Each email counts once against MAILSINK_RELEASE_PER_MINUTE: past it, the rest are answered not sent.",
    "parameters":page+filters+[before],
    "requestBody":{"required":True,"content":{"application/json":{"schema":ref("ReleaseRequest")}}},
    "responses":std(**{"200":{"description":"What became of each selected email.",**j("BulkReleaseResponse")},
      "404":r("NotFound"),"409":r("NoRelay"),"429":r("ReleaseLimited"),
      "502":{"description":"The connection to the upstream failed (connecting, TLS, AUTH): nothing was sent.",**j("ErrorResponse")}})}},
 "/v1/emails/{emailId}/raw":{"parameters":[emailId],
  "get":{"operationId":"getEmailRaw","summary":"The raw message, byte-exact.","security":sec,
    "responses":std(**{"200":{"description":"The raw source.","content":{"message/rfc822":{"schema":{"type":"string"}}}},"404":r("NotFound")})}},
 "/v1/emails/{emailId}/links":{"parameters":[emailId],
  "get":{"operationId":"getEmailLinks","summary":"The links of the email: those of its HTML part in document order (a and area href), then the URLs of its text part not already listed.","security":sec,
    "description":"Only http, https and mailto URLs; relative, javascript:, data: and other URLs are left out. An HTML link repeated with the same URL and text is listed once (the same URL with other text is listed again); a text-part URL is listed only if no earlier link has it. In text, a URL starts with http://, https:// or mailto: (not inside a word) and runs to white space, a control character or one of < > \" ` { } | \\ ^, without trailing . , ; : ! ? ' * or an unmatched closing bracket. At most 1000 links.",
    "responses":std(**{"200":{"description":"The links.",**j("LinksResponse")},"404":r("NotFound")})}},
 "/v1/emails/{emailId}/codes":{"parameters":[emailId],
  "get":{"operationId":"getEmailCodes","summary":"The one-time codes (verification, sign-in, confirmation) of the email's subject, text part and HTML part, in that order, each value once.","security":sec,
    "description":"A code is 4 to 8 digits; 4 to 10 upper-case letters and digits with at least one of each (not a word then a number, as promotion codes such as SAVE20 are); or such a code split into groups by single spaces or dashes (2 to 4 digit groups of one length, at most 8 digits; 4 to 8 single digits, as in one table cell each; 2 to 3 groups of 3 to 5 letters and digits). It is listed only when a code word of one of many languages (code, verify, OTP, PIN, Bestätigungscode, code de vérification, código, codice, kod, код, コード, 認証番号, 验证码, 인증번호 and more) is on its line (the first code after it within 60 characters, or the last one before it within 30), or on one of the three lines above when the code stands alone on its line. A code word qualified as something else (zip code, código postal, promo code, QR code) does not count. Numbers that are part of dates, times, prices, phone numbers, or follow order, invoice, tracking, phone or reference words are left out. HTML is read as text: a line per block and table row, the cells of a row on one line. At most 20 codes, from the first 256 KiB of each part.",
    "responses":std(**{"200":{"description":"The codes.",**j("CodesResponse")},"404":r("NotFound")})}},
 "/v1/emails/{emailId}/transcript":{"parameters":[emailId],
  "get":{"operationId":"getEmailTranscript","summary":"The SMTP transaction that delivered the email, as the server saw it; null for an email that came over HTTP.","security":sec,
    "responses":std(**{"200":{"description":"The transcript.",**j("TranscriptResponse")},"404":r("NotFound")})}},
 **{"/v1/emails/{emailId}/checks/"+name:{"parameters":[emailId,refresh],
  "get":{"operationId":op,"summary":summary,"security":sec,"description":desc,
    "responses":std(**{"200":{"description":"The result, kept with the email until it is deleted or refreshed.",**j(schema)},"404":r("NotFound"),**extra})}}
  for name,op,schema,summary,desc,extra in [
   ("html","getEmailHTMLCheck","HTMLCheckResponse","The HTML part checked against email clients (caniemail data).",
    "Finds the elements, attributes, CSS properties and values (style attributes and style elements), at-rules, selectors, units and image formats the HTML part uses, and lists those some client does not support or supports in part, with the clients and the data's notes. The bundled caniemail snapshot (MIT) and its date are in data.",{}),
   ("links","getEmailLinkCheck","LinkCheckResponse","The message's links and images, fetched now: what each answers.",
    "The http and https links (as getEmailLinks lists them) and images (img src, srcset) are fetched with HEAD, then GET when HEAD is refused, without reading a body or keeping cookies, through the webhooks' SSRF rules (private and loopback addresses only with the account's webhooks.allowPrivateTargets; every redirect hop checked): at most 100 URLs, 2 at once per host, 5 s and 10 redirects each. Nothing is fetched when mail arrives: this request is the opt-in.",{}),
   ("spam","getEmailSpamCheck","SpamCheckResponse","The message's spam score from SpamAssassin's spamd.",
    "The first 500 KB of the raw message are scored by the spamd at MAILSINK_SPAMD_ADDR (SPAMC REPORT).",
    {"409":{"description":"The spam check is not configured: MAILSINK_SPAMD_ADDR is not set.",**j("ErrorResponse")},
     "502":{"description":"spamd failed or could not be reached.",**j("ErrorResponse")}}),
   ("auth","getEmailAuthCheck","AuthCheckResponse","The message's authentication: DKIM, SPF and DMARC.",
    "DKIM signatures (at most 5) verified over the raw message as stored; SPF for the SMTP client that delivered it; DMARC, the From domain's policy and the alignment of the passing identities. DNS through MAILSINK_DNS_RESOLVER or the system's resolver.",{}),
  ]},
 "/v1/faults":{
  "post":{"operationId":"createFault","summary":"Add a fault rule to the account: its SMTP transactions then fail, wait or are cut as the rule says (README, Fault injection).","security":sec,
    "description":"Rules live in the store, so every replica applies them and a restart keeps them. A command hit by a reply or a disconnect has no effect (a faulted transaction stores nothing); the rule's account must be known at its stage: by AUTH, by the recipient's domain (rcpt and later), or because it is the only account. At most 100 rules per account (409 above).",
    "requestBody":{"required":True,"content":{"application/json":{"schema":ref("FaultRuleRequest")}}},
    "responses":std(**{"201":{"description":"The stored rule.",**j("FaultRuleResponse")},"409":r("Conflict")})},
  "get":{"operationId":"listFaults","summary":"The account's fault rules that have not expired, oldest first (the order in which they are tried).","security":sec,
    "responses":std(**{"200":{"description":"The rules.",**j("FaultRuleListResponse")}})},
  "delete":{"operationId":"deleteFaults","summary":"Delete every fault rule of the account.","security":sec,
    "responses":std(**{"204":{"description":"Deleted."}})}},
 "/v1/faults/{faultId}":{"parameters":[{"name":"faultId","in":"path","required":True,"schema":uuid}],
  "delete":{"operationId":"deleteFault","summary":"Delete one fault rule of the account.","security":sec,
    "responses":std(**{"204":{"description":"Deleted."},"404":{"description":"No such rule in the key's account.",**j("ErrorResponse")}})}},
 "/v1/emails/{emailId}/attachments/{index}":{"parameters":[emailId,{"name":"index","in":"path","required":True,"schema":{"type":"integer","minimum":0},"description":"Position in body.attachments, from 0."}],
  "get":{"operationId":"getEmailAttachment","summary":"The decoded content of one attachment, as a download (Content-Disposition: attachment).","security":sec,
    "responses":std(**{"200":{"description":"The attachment, with its content type.","content":{"application/octet-stream":{"schema":{"type":"string","contentEncoding":"binary"}}}},"404":r("NotFound")})}},
 "/v1/events":{
  "get":{"operationId":"streamEvents","summary":"Server-Sent Events of the account: email.created, email.updated, email.deleted; data is EventData. Resume with Last-Event-ID.","security":sec,
    "parameters":[{"name":"Last-Event-ID","in":"header","required":False,"schema":{"type":"string","pattern":"^[0-9]+-[0-9]+$"}},
                  q("lastEventId",{"type":"string","pattern":"^[0-9]+-[0-9]+$"},"Same as the Last-Event-ID header.")],
    "responses":std(**{"200":{"description":"The event stream.","content":{"text/event-stream":{"schema":{"type":"string"}}}},"429":r("TooManyRequests")})}},
 "/v1/inbound":{
  "post":{"operationId":"inbound","summary":"Store a raw RFC 5322 message, one email per envelope recipient.","security":inbound_sec,
    "parameters":[{"name":"X-Envelope-From","in":"header","required":False,"schema":{"type":"string"}},
                  {"name":"X-Envelope-To","in":"header","required":False,"schema":{"type":"string"},"description":"Comma-separated recipients; default: the To and Cc headers."},idem],
    "requestBody":{"required":True,"content":{"message/rfc822":{"schema":{"type":"string"}}}},
    "responses":std(**{"201":{"description":"The stored emails.",**j("ListResponse")},"409":r("Conflict"),"413":r("TooLarge"),"429":r("TooManyWrites")})}},
 "/v1/webhooks":{
  "get":{"operationId":"listWebhooks","summary":"The account's webhooks, oldest first (without their secrets).","security":sec,
    "responses":{"200":{"description":"The webhooks.",**j("WebhookListResponse")},"401":r("Unauthorized"),"503":r("Unavailable")}},
  "post":{"operationId":"createWebhook","summary":"Subscribe a URL to the account's email events; the answer holds the signing secret, shown only here.","security":sec,
    "description":"Deliveries are POSTs of a WebhookPayload with the Standard Webhooks headers webhook-id, webhook-timestamp and webhook-signature (README, Webhooks). Any 2xx ends a delivery; anything else, redirects included (never followed), is retried with exponential backoff for MAILSINK_WEBHOOK_RETRY_FOR (24h), with the same webhook-id.",
    "requestBody":{"required":True,"content":{"application/json":{"schema":ref("CreateWebhookRequest")}}},
    "responses":std(**{"201":{"description":"Created.",**j("WebhookResponse")},"409":r("Conflict")})}},
 "/v1/webhooks/{webhookId}":{"parameters":[{"name":"webhookId","in":"path","required":True,"schema":uuid}],
  "get":{"operationId":"getWebhook","summary":"One webhook (without its secret).","security":sec,
    "responses":std(**{"200":{"description":"The webhook.",**j("WebhookResponse")},"404":r("NotFound")})},
  "delete":{"operationId":"deleteWebhook","summary":"Delete the webhook and its pending deliveries.","security":sec,
    "responses":std(**{"204":{"description":"Deleted."},"404":r("NotFound")})}},
 "/v1/webhooks/{webhookId}/deliveries":{"parameters":[{"name":"webhookId","in":"path","required":True,"schema":uuid}],
  "get":{"operationId":"listWebhookDeliveries","summary":"The webhook's delivery log, newest first (the last 1000 deliveries are kept).","security":sec,
    "parameters":[q("limit",{"type":"integer","minimum":1,"maximum":100,"default":20},"Page size.")],
    "responses":std(**{"200":{"description":"The deliveries.",**j("WebhookDeliveryListResponse")},"404":r("NotFound")})}},
 **provider_paths,
 "/v1/openapi.json":{"get":{"operationId":"openAPI","summary":"This document.","security":[],
    "responses":{"200":{"description":"OpenAPI 3.1 document.","content":{"application/json":{"schema":{"type":"object"}}}}}}},
 "/healthz":{"get":{"operationId":"health","summary":"The process is up.","security":[],
    "responses":{"200":{"description":"Up.",**j("HealthResponse")}}}},
 "/readyz":{"get":{"operationId":"ready","summary":"The store answers reads: the readiness probe.","security":[],
    "responses":{"200":{"description":"Ready.",**j("HealthResponse")},"503":r("Unavailable")}}},
 "/readyz/writes":{"get":{"operationId":"writesReady","summary":"The store takes writes, as far as the last write tells: 503 while writes fail because the store is full or unavailable. For alerting, not readiness (a replica whose store is full stays in service so that mail can be deleted).","security":[],
    "responses":{"200":{"description":"Writes succeed.",**j("HealthResponse")},"503":r("Unavailable")}}},
 "/tls/certificate.pem":{"get":{"operationId":"tlsCertificate","summary":"The TLS certificate that STARTTLS, the implicit-TLS SMTP listener and the HTTPS listener present (PEM, no key), so that clients can trust it.","security":[],
    "responses":{"200":{"description":"The certificate chain in use, PEM.","content":{"application/x-pem-file":{"schema":{"type":"string"}}}},
      "404":{"description":"No TLS certificate is configured.",**j("ErrorResponse")}}}},
}
# Every request with a body may wait for room for it (the body budget, the
# large-transfer turns) and then be answered 429.
# A provider's webhook answers 503 instead (every provider retries it).
for path, ops in paths.items():
  for op in ops.values():
    if "requestBody" in op and "429" not in op["responses"] and not path.startswith("/v1/inbound/"):
      op["responses"]["429"]=r("TooManyWrites")
doc={"openapi":"3.1.0","info":{"title":"mailsink API","version":"1.0.0",
  "description":"Captured email inspection: list, create, read, update and delete the emails of the API key's account."},
 "servers":[{"url":"/"}],"security":sec,"paths":paths,
 "webhooks":{"emailEvent":{"post":{"operationId":"emailEvent","summary":"What mailsink sends to a webhook's URL.",
   "parameters":[{"name":n,"in":"header","required":True,"schema":{"type":"string"},"description":d} for n,d in [
     ("webhook-id","The delivery's id: the same on every attempt."),
     ("webhook-timestamp","Unix seconds of this attempt."),
     ("webhook-signature","v1,<base64 HMAC-SHA256 of \"id.timestamp.body\" keyed with the base64-decoded part of the secret after whsec_>.")]],
   "requestBody":{"required":True,"content":{"application/json":{"schema":ref("WebhookPayload")}}},
   "responses":{"200":{"description":"Any 2xx ends the delivery; anything else is retried."}}}}},
 "components":{"schemas":schemas,"responses":resp,"securitySchemes":{
   "bearer":{"type":"http","scheme":"bearer"},"apiKey":{"type":"apiKey","in":"header","name":"x-api-key"},
   "basic":{"type":"http","scheme":"basic","description":"Any user name; the password is an API key. Only on /v1/inbound routes."}}}}
print(json.dumps(doc,indent=1))
