package workspace

import "time"

// Workspace is one tenant account: an owner and their API keys.
type Workspace struct {
	ID          string    `bson:"_id"`
	Name        string    `bson:"name"`
	OwnerID     string    `bson:"ownerId"`
	OwnerEmail  string    `bson:"ownerEmail"` // lower-cased; unique
	OwnerName   string    `bson:"ownerName"`
	OwnerAvatar string    `bson:"ownerAvatar"`
	TokenHash   string    `bson:"tokenHash"`  // hash of the workspace auth token
	TokenLast4  string    `bson:"tokenLast4"` // for the masked form
	Settings    Settings  `bson:"settings"`
	CreatedAt   time.Time `bson:"createdAt"`
	// SlackWebhookURL is the Slack incoming-webhook URL notifications are posted to; empty when
	// none is set. A secret: callers see it masked, only the internal GetSlackWebhook gives it
	// whole, and it is never logged. It is kept out of Settings, which authentication copies
	// onto the caller (authn.Settings), so it cannot travel with the caller or its cache.
	SlackWebhookURL string `bson:"slackWebhookUrl"`

	EmailVerified bool `bson:"emailVerified"`
	// KeysActive means the API keys no longer depend on the grace period: set when the email
	// is verified within the grace period, or by Get Email Verification Status afterwards.
	KeysActive bool `bson:"keysActive"`
	// VerifyTokenHash is the hash of the pending single-use verification token; empty once used.
	VerifyTokenHash string `bson:"verifyTokenHash"`
}

// Settings are the console switches.
type Settings struct {
	AdvancedQueries  bool `bson:"advancedQueries"`
	Notifications    bool `bson:"notifications"`
	AdvancedWebhooks bool `bson:"advancedWebhooks"`
}

// SettingsPatch changes the switches that are not nil, and the Slack webhook URL when it is not
// nil ("" removes it).
type SettingsPatch struct {
	AdvancedQueries  *bool
	Notifications    *bool
	AdvancedWebhooks *bool
	SlackWebhookURL  *string
}

// APIKey is a key-level credential. The key itself is its id: it travels in headers and is
// not a secret; its auth tokens are, and only their hashes are kept.
type APIKey struct {
	Key            string      `bson:"_id"`
	WorkspaceID    string      `bson:"workspaceId"`
	Name           string      `bson:"name"`
	Type           string      `bson:"type"`
	AllowedDomains []string    `bson:"allowedDomains"`
	Tokens         []AuthToken `bson:"tokens"`
	CreatedAt      time.Time   `bson:"createdAt"`
	// TokenGeneration moves on each time the key's auth tokens are replaced (Reset Auth Token).
	// Tokens generated for the key (JWTs of Generate Token) carry the generation they were
	// made in, so a reset revokes them too. Keys stored before it existed read as 0.
	TokenGeneration int64 `bson:"tokenGeneration"`
}

// AuthToken is a stored auth token of an API key.
type AuthToken struct {
	Hash      string    `bson:"hash"`
	Last4     string    `bson:"last4"`
	Name      string    `bson:"name"`
	CreatedAt time.Time `bson:"createdAt"`
}

// KeyPosition is a place in the API key listing order (CreatedAt, then Key).
type KeyPosition struct {
	CreatedAt time.Time
	Key       string
}

// API key types.
const (
	KeyTypeTesting    = "testing"
	KeyTypeProduction = "production"
)
