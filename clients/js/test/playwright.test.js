// The example of docs/clients.md: a person signs up on a tiny
// page, the app sends a confirmation mail over SMTP, the test waits for it
// with the client and follows the emailed link in a real browser.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { chromium } from 'playwright-core';
import { Mailsink } from '../index.js';
import { startMailsink, sendSMTP } from './mailsink.js';

let mailsink;
let app;
let browser;

// The app under test: a sign-up form; signing up mails a confirmation link.
function startApp(smtpPort) {
  const pending = new Map(); // token -> address
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, `http://${req.headers.host}`);
    res.setHeader('content-type', 'text/html; charset=utf-8');
    if (req.method === 'GET' && url.pathname === '/') {
      res.end('<form method="post" action="/signup"><label>Email <input name="email" type="email"></label>' +
        '<button>Sign up</button></form>');
    } else if (req.method === 'POST' && url.pathname === '/signup') {
      let body = '';
      for await (const chunk of req) body += chunk;
      const email = new URLSearchParams(body).get('email');
      const token = randomBytes(8).toString('hex');
      pending.set(token, email);
      const link = `http://${req.headers.host}/confirm?token=${token}`;
      await sendSMTP(smtpPort, 'no-reply@app.test', email,
        `From: Example App <no-reply@app.test>\nTo: ${email}\nSubject: Confirm your account\n` +
        `Content-Type: text/html; charset=utf-8\n\n<p>Welcome! <a href="${link}">Confirm your account</a></p>\n`);
      res.end('<p>Check your inbox</p>');
    } else if (req.method === 'GET' && url.pathname === '/confirm' && pending.has(url.searchParams.get('token'))) {
      res.end(`<h1>Account confirmed for ${pending.get(url.searchParams.get('token'))}</h1>`);
    } else {
      res.statusCode = 404;
      res.end('not found');
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

before(async () => {
  mailsink = await startMailsink();
  app = await startApp(mailsink.smtpPort);
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
  app?.close();
  await mailsink?.stop();
});

test('sign up and follow the emailed link', async () => {
  const ms = new Mailsink({ baseUrl: mailsink.baseUrl, apiKey: mailsink.apiKey });
  const address = `user-${Date.now()}@example.test`;
  const page = await browser.newPage();

  await page.goto(`http://127.0.0.1:${app.address().port}/`);
  await page.getByLabel('Email').fill(address);
  await page.getByRole('button', { name: 'Sign up' }).click();
  await page.getByText('Check your inbox').waitFor();

  const email = await ms.waitForEmail({ recipient: address }, { timeout: 15000 });
  const link = (await ms.links(email.id)).find((l) => l.text === 'Confirm your account');
  assert.ok(link, 'the mail has a confirmation link');
  await page.goto(link.url);
  assert.equal(await page.locator('h1').textContent(), `Account confirmed for ${address}`);
});
