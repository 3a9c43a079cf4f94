package httpapi_test

import "github.com/mailsink/mailsink/config"

type configT = config.Config
