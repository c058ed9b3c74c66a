-- wrk script: POST /chat/{room}/say with a JSON body (any well-formed CSRF token works
-- when the cookie and the header carry the same one).
--   wrk -t2 -c32 -d5s -s tests/integration/chat/wrk_say.lua http://127.0.0.1:PORT/chat/lobby/say
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Cookie"] = "kagi_csrf=0123456789abcdef0123456789abcdef"
wrk.headers["X-CSRF-Token"] = "0123456789abcdef0123456789abcdef"
wrk.body = '{"name":"wrk","text":"load test message"}'
