// Memory: a playground for Search Judgments (a query, its scope and filters, the results with
// their similarity scores) and the agent executions, page by page (List Agent Executions)
// (docs/console.md, "Memory"; the operations: docs/api.md, "Memory and agents").
import { call } from '../api.js';
import { compact, el, form, pager, section, time } from '../ui.js';

const number = (s) => (String(s).trim() === '' ? '' : Number(s));

export default {
  id: 'memory',
  title: 'Memory',
  render(body) {
    body.append(searchSection(), executionsSection());
  },
};

function searchSection() {
  const results = el('div', { id: 'memory-results' });
  const f = form([
    { name: 'query', label: 'Query', help: 'What to look for, in words: judgments are found by meaning.' },
    { name: 'organizationId', label: 'Organization id' },
    { name: 'documentId', label: 'Document id' },
    { name: 'scope', label: 'Scope', type: 'select', options: [['', 'from the ids'], ['document', 'document'], ['organization', 'organization'], ['apiKey', 'every judgment of the API key']] },
    { name: 'embeddingType', label: 'Compare with', type: 'select', options: [['review', 'decision and reasoning'], ['content', 'the reviewed content']] },
    { name: 'limit', label: 'Results', type: 'number', value: 10, help: '1 to 50.' },
    { name: 'recencyDays', label: 'Only the last days', type: 'number', help: '1 to 365; newest first, no query needed.' },
    { name: 'decision', label: 'Filter: decision' },
    { name: 'judgeType', label: 'Filter: judge', type: 'select', options: [['', 'any'], ['human', 'human'], ['agent', 'agent']] },
    { name: 'contentType', label: 'Filter: content type' },
    { name: 'reviewerId', label: 'Filter: reviewer id' },
    { name: 'annotationId', label: 'Filter: thread (annotation id)', help: 'That thread\'s judgments, oldest first, no query needed.' },
    { name: 'start', label: 'Filter: created from', help: 'Epoch ms, an RFC 3339 time or a date (2026-11-02).' },
    { name: 'end', label: 'Filter: created until' },
  ], 'Search', async (v) => {
    const dateRange = compact({ start: v.start.trim(), end: v.end.trim() });
    const filters = compact({
      decision: v.decision.trim(), judgeType: v.judgeType, contentType: v.contentType.trim(), reviewerId: v.reviewerId.trim(),
      annotationId: v.annotationId.trim(), dateRange: Object.keys(dateRange).length ? dateRange : '',
    });
    const q = compact({
      query: v.query, organizationId: v.organizationId.trim(), documentId: v.documentId.trim(), scope: v.scope,
      embeddingType: v.embeddingType, limit: number(v.limit), recencyDays: number(v.recencyDays),
      filters: Object.keys(filters).length ? filters : '',
    });
    results.replaceChildren();
    const r = await call('/v2/memory/search', q);
    results.replaceChildren(section('Results',
      el('p', { id: 'memory-summary' }, `${r.results.length} of ${r.totalInScope} judgments in scope, searched in ${r.searchLatencyMs.toFixed(2)} ms.`),
      r.results.length ? resultsTable(r.results) : el('p', {}, 'Nothing found.')));
  }, { label: 'Search judgments' });
  f.id = 'memory-search';
  f.classList.add('wide');
  return section('Search judgments', f, results);
}

function resultsTable(rows) {
  return el('table', { class: 'grid' },
    el('caption', {}, 'Best first'),
    el('thead', {}, el('tr', {}, ['Similarity', 'Decision', 'Reasoning', 'Confidence', 'By', 'Agent', 'Created', 'Scope', 'Record id'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows.map((r) => el('tr', {},
      el('td', {}, el('span', { class: 'score' }, r.similarity.toFixed(4)), el('span', { class: 'scorebar', 'aria-hidden': 'true' }, el('span', { class: 'fill w' + Math.round(Math.max(0, r.similarity) * 10) }))),
      el('td', {}, r.decision), el('td', {}, r.reasoning),
      el('td', {}, r.confidence === null || r.confidence === undefined ? '' : String(r.confidence)),
      el('td', {}, r.actionUser ? r.actionUser.name : ''),
      el('td', {}, r.agent ? `${r.agent.agentName || r.agent.agentId} v${r.agent.agentVersion}` : ''),
      el('td', {}, time(r.createdAt)), el('td', {}, r.scope), el('td', {}, r.recordId)))));
}

function executionsSection() {
  const box = el('div', { id: 'executions' });
  const f = form([
    { name: 'agentId', label: 'Agent id' },
    { name: 'organizationId', label: 'Organization id' },
    { name: 'documentId', label: 'Document id' },
    { name: 'status', label: 'Status', type: 'select', options: [['', 'any'], ['running', 'running'], ['passed', 'passed'], ['failed', 'failed'], ['error', 'error'], ['skipped', 'skipped']] },
    { name: 'orderDirection', label: 'Order by start', type: 'select', options: [['desc', 'newest first'], ['asc', 'oldest first']] },
    { name: 'pageSize', label: 'Per page', type: 'number', value: 50, help: '1 to 500.' },
  ], 'Show executions', async (v) => {
    const q = compact({
      agentId: v.agentId.trim(), organizationId: v.organizationId.trim(), documentId: v.documentId.trim(),
      status: v.status, orderDirection: v.orderDirection, pageSize: number(v.pageSize),
    });
    box.replaceChildren(pager([
      { key: 'id', label: 'Execution' },
      { label: 'Agent', render: (x) => `${x.agentName || x.agentId} v${x.agentVersion}` },
      { key: 'status', label: 'Status' },
      { key: 'trigger', label: 'Trigger' },
      { label: 'Started', render: (x) => time(x.startedAt) },
      { label: 'Duration (ms)', render: (x) => (x.durationMs === null || x.durationMs === undefined ? '' : String(x.durationMs)) },
      { key: 'message', label: 'Message' },
    ], async (cursor) => {
      const r = await call('/v2/agents/execution/list', { ...q, cursor: cursor || undefined });
      return { rows: r.items, next: r.hasMore ? r.nextCursor : '' };
    }, { caption: 'Agent executions', moreLabel: 'Next page of executions' }));
  }, { label: 'Agent executions' });
  f.id = 'executions-query';
  queueMicrotask(() => f.requestSubmit());
  return section('Agent executions', f, box);
}
