package connpool

import "testing"

func TestWithReadWrite(t *testing.T) {
	t.Parallel()
	tests := []struct{ dsn, want string }{
		{"host=a,b,c port=5000 dbname=z", "host=a,b,c port=5000 dbname=z target_session_attrs=read-write"},
		{"hostaddr=10.0.0.1,10.0.0.2 dbname=z", "hostaddr=10.0.0.1,10.0.0.2 dbname=z target_session_attrs=read-write"},
		{"host=a,b dbname=z target_session_attrs=any", "host=a,b dbname=z target_session_attrs=any"},
		{"host=a dbname=z", "host=a dbname=z"},
		{"postgres://u@a:5000,b:5000/z?sslmode=disable", "postgres://u@a:5000,b:5000/z?sslmode=disable&target_session_attrs=read-write"},
		{"postgres://u@a:5432/z?sslmode=disable", "postgres://u@a:5432/z?sslmode=disable"},
	}
	for _, tt := range tests {
		if got := WithReadWrite(tt.dsn); got != tt.want {
			t.Errorf("WithReadWrite(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}
