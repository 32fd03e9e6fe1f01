// The console's one way to data: the public HTTP API, called like any client with the API's
// own headers (docs/console.md). Credentials live in this tab's sessionStorage only: no cookie
// is ever set, so no other site can make the browser send them.

const storageKey = 'collab.console.credentials';

// credentials returns what the user signed in with: {workspaceId, workspaceAuthToken} (W)
// and/or {apiKey, authToken} (K).
export function credentials() {
  try {
    return JSON.parse(sessionStorage.getItem(storageKey) || '{}');
  } catch {
    return {};
  }
}

export function setCredentials(c) {
  sessionStorage.setItem(storageKey, JSON.stringify(c));
}

export function signOut() {
  sessionStorage.removeItem(storageKey);
}

// APIError is an answer of the API that is not a result: its HTTP status and the envelope's
// status and message, shown to the user as they are, and the envelope's details when it has
// them (Get Permissions' per-user entries of a missing folder or document).
export class APIError extends Error {
  constructor(httpStatus, status, message, details) {
    super(message);
    this.httpStatus = httpStatus;
    this.status = status;
    this.details = details;
  }
  toString() {
    return `${this.httpStatus} ${this.status}: ${this.message}`;
  }
}

// call POSTs {"data": data} to path and returns the envelope's result. auth says which
// credentials go: 'K' (API key and auth token), 'W' (workspace id and token), 'P' (none: the
// public operations), or a JWT given as {bearer: token} for the operations end users call.
export async function call(path, data, auth = 'K') {
  const c = credentials();
  const headers = { 'content-type': 'application/json' };
  if (auth === 'K') {
    headers['x-service-api-key'] = c.apiKey || '';
    headers['x-service-auth-token'] = c.authToken || '';
  } else if (auth === 'W') {
    headers['x-service-workspace-id'] = c.workspaceId || '';
    headers['x-service-workspace-auth-token'] = c.workspaceAuthToken || '';
  } else if (auth && auth.bearer) {
    headers['authorization'] = 'Bearer ' + auth.bearer;
  }
  let res;
  try {
    res = await fetch(path, { method: 'POST', headers, body: JSON.stringify({ data: data || {} }) });
  } catch (e) {
    throw new APIError(0, 'UNAVAILABLE', 'The server could not be reached: ' + e.message);
  }
  let body = null;
  try {
    body = await res.json();
  } catch {
    throw new APIError(res.status, 'UNKNOWN', 'The answer was not JSON.');
  }
  if (!res.ok || (body && body.error)) {
    const e = (body && body.error) || {};
    throw new APIError(res.status, e.status || 'UNKNOWN', e.message || res.statusText, e.details);
  }
  return body ? body.result : null;
}

// config is what the server tells the console: {devWorkspace} (the development workspace's
// published credentials on a local run, else null).
export async function config() {
  const res = await fetch('config.json');
  return res.json();
}
