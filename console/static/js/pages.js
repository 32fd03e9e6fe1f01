// The console's pages in the navigation's order: each module exports {id, title, render}.
import workspace from './pages/workspace.js';
import webhooks from './pages/webhooks.js';
import comments from './pages/comments.js';
import crdt from './pages/crdt.js';
import memory from './pages/memory.js';

export const pages = [workspace, webhooks, comments, crdt, memory];
