import type {
  EmailSummary, EmailDetail, EmailLink, Status, CreateEmailRequest, UpdateEmailRequest, operations,
  HTMLCheckResponse, LinkCheckResponse, SpamCheckResponse, AuthCheckResponse,
  ReleaseReply, ReleaseResult, EmailStats,
} from './types.js';

// types.d.ts is generated from api/openapi.yaml by openapi-typescript (npm run gen).
export type * from './types.js';

/** The query parameters of an operation of the API, by operationId. */
export type Query<Op extends keyof operations> = NonNullable<operations[Op]['parameters']['query']>;

/** Filters of list, count, delete and waitForEmail; since may be a Date. */
export type Filter = Omit<Query<'deleteEmails'>, 'all' | 'since'> & { since?: string | Date };
export type ListParams = Omit<Query<'listEmails'>, 'wait' | 'since'> & { since?: string | Date };
export type CountParams = Omit<Query<'countEmails'>, 'since'> & { since?: string | Date };
export type ReleaseParams = Omit<Query<'releaseEmails'>, 'since'> & { since?: string | Date };

/** An error answer of the API. */
export class MailsinkError extends Error {
  readonly status: number;
  /** A 400's errors by field or parameter name. */
  readonly fieldErrors: Record<string, string[]>;
  readonly formErrors: string[];
}

export interface Download {
  contentType: string;
  filename: string | null;
  data: Uint8Array;
}

/** The result of each check of an email, by its name. */
export interface CheckResults {
  html: HTMLCheckResponse;
  links: LinkCheckResponse;
  spam: SpamCheckResponse;
  auth: AuthCheckResponse;
}

export class Mailsink {
  constructor(options: { baseUrl: string; apiKey: string; fetch?: typeof fetch });
  list(params?: ListParams): Promise<EmailSummary[]>;
  count(params?: CountParams): Promise<number>;
  /** Resolves with the newest matching email once one is stored; rejects with a TimeoutError after timeout ms (30000). */
  waitForEmail(filter?: Filter, options?: { timeout?: number; signal?: AbortSignal }): Promise<EmailSummary>;
  get(id: string): Promise<EmailDetail>;
  stats(): Promise<EmailStats>;
  update(id: string, patch: UpdateEmailRequest): Promise<EmailSummary>;
  delete(id: string): Promise<void>;
  deleteMany(filter: Filter | { all: true }): Promise<number>;
  raw(id: string): Promise<string>;
  attachment(id: string, index: number): Promise<Download>;
  links(id: string): Promise<EmailLink[]>;
  /** The one-time codes, as typed: "123 456" in the message is "123456". */
  codes(id: string): Promise<string[]>;
  /**
   * A check of an email, kept with it (refresh runs it again). spam rejects with status 409 when the server
   * has no spamd, 502 when spamd fails.
   */
  check<N extends keyof CheckResults>(id: string, name: N, options?: { refresh?: boolean }): Promise<CheckResults[N]>;
  /** Sends the email, as stored, to real recipients through the account's relay; resolves with the upstream's reply. */
  release(id: string, to: string | string[]): Promise<ReleaseReply>;
  /** Sends the emails a list query selects (one page) through the account's relay; resolves with each one's result. */
  releaseMany(params: ReleaseParams, to: string | string[]): Promise<ReleaseResult[]>;
  create(email: CreateEmailRequest): Promise<EmailSummary>;
  inbound(raw: string | Uint8Array, envelope?: { from?: string; to?: string | string[] }): Promise<EmailSummary[]>;
}

export type { Status };
