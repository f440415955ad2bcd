"""The labelled memories and questions of bench/memory_recall.py, written for it:
:func:`labelled_lives` gives them all, dated.

Four users with two years of conversations each (bench/_recall_life.py: several hundred
memories, four kinds of question), two in English and two in Chinese, and the six
hand-written users below.

Six users, three who write English and three whose memories are in Chinese. Each memory has
a key; each question names the key of the one memory that answers it. Questions are of two
kinds:

- ``lexical``: the question shares at least one search term with its memory;
- ``paraphrase``: the question shares no search term with its memory (checked by the bench
  with the server's own term rules), e.g. "Do I eat meat?" -> "I have been vegetarian...".

Every user also has memories on nearby topics (the distractors: cooking next to diet, the
spouse's job next to the user's), and some facts were updated: the superseded text is added
first, the new one later, and the right answer is the new one (``OLD_FACTS``). Their
memories are dated over the same two years: the superseded ones in the first months,
the others later.
"""

from __future__ import annotations

import random

import _life_en
import _life_zh
from _recall_life import DAYS, Fact, Kind, Lang, Life, Question, live

# The users of bench/_recall_life.py, per language.
LONG_LIVES = {"en": ("olivia", "noah"), "zh": ("wangfang", "lihua")}


# user -> key -> text
MEMORIES: dict[str, dict[str, str]] = {
    "amy": {
        "veg": "I have been vegetarian since 2015.",
        "job": "I work as a nurse in the cardiology ward at St Mary's hospital.",
        "kid": "My daughter Lily is seven and starts piano lessons this autumn.",
        "home": "I moved to Porto last year and rent a flat near the river.",
        "coffee": "My favourite drink is black coffee without sugar.",
        "pet": "I have a golden retriever called Biscuit.",
        "swim": "I go swimming every Tuesday and Thursday at 7 am.",
        "allergy": "I am allergic to penicillin.",
        "notes": "I write my notes in Obsidian and sync them with Git.",
        "spouse": "My husband Tom is a secondary school history teacher.",
        "seat": "I prefer window seats on long flights.",
        "lang": "I am learning Japanese for a trip to Kyoto next spring.",
        "bp": "My blood pressure tablets go down with breakfast each morning.",
        "curry": "I love cooking spicy Thai curries on weekends.",
        "mum": "My mother lives with us since her hip surgery.",
    },
    "ben": {
        "job": "I am a backend developer at a fintech startup in Berlin.",
        "diet": "I am lactose intolerant, so no milk or cheese for me.",
        "car": "I drive a blue 2019 Volkswagen Golf.",
        "run": "I am training for the Berlin marathon in September.",
        "kids": "My twins Max and Mia turned four in March.",
        "editor": "I use Neovim with a tmux setup for all my coding.",
        "wife": "My wife Sara is an architect who designs schools.",
        "sleep": "I usually go to bed around midnight and wake up at 7.",
        "cat": "Our cat Pixel is a grey British shorthair.",
        "music": "I play bass guitar in a jazz band on Friday nights.",
        "knee": "I had surgery on my left knee after a football injury.",
        "tea": "I drink green tea instead of coffee after lunch.",
        "standup": "Our team standup is at 9:30 every weekday.",
        "holiday": "Every August we rent a cabin by a lake in Sweden.",
        "brother": "My brother works as a chef in a restaurant in Hamburg.",
    },
    "cora": {
        "job": "I teach mathematics at a high school in Toronto.",
        "diet": "I follow a gluten-free diet because of coeliac disease.",
        "bike": "I commute by bicycle unless it snows.",
        "dog": "My dog Pepper is a small black poodle.",
        "parents": "My parents are retired and live in Vancouver.",
        "yoga": "I do yoga on Monday and Wednesday evenings.",
        "book": "My favourite author is Haruki Murakami.",
        "phone": "I use an iPhone 15 and a MacBook Air.",
        "garden": "I grow tomatoes and basil on my balcony.",
        "migraine": "I get migraines when I sleep less than six hours.",
        "partner": "My partner Sam works night shifts as a paramedic.",
        "piano": "I have played the piano since I was five.",
        "budget": "I track every expense in a spreadsheet.",
        "birthday": "My birthday is on the 14th of February.",
        "baking": "I bake sourdough bread every Sunday morning.",
    },
    "xiaowang": {
        "spicy": "用户不喜欢吃辣",
        "job": "用户是一名软件工程师，在杭州的电商公司上班",
        "home": "用户现在住在深圳南山区",
        "cat": "用户养了一只橘猫，名字叫年糕",
        "run": "用户每周六早上去公园跑步五公里",
        "tea": "用户每天下午喝一杯乌龙茶",
        "mother": "用户的母亲在老家开一家小超市",
        "allergy": "用户对花生过敏",
        "laptop": "用户用的电脑是联想笔记本",
        "english": "用户正在准备雅思考试",
        "game": "用户周末喜欢玩围棋",
        "sleep": "用户一般晚上十二点以后才睡觉",
        "car": "用户开一辆白色的比亚迪电动车",
        "hotpot": "用户最爱吃的是清汤火锅",
        "sister": "用户的姐姐在北京当律师",
    },
    "lina": {
        "job": "用户在上海一家医院当儿科医生",
        "diet": "用户是素食者，不吃任何肉类",
        "kid": "用户的儿子今年六岁，刚上小学一年级",
        "husband": "用户的丈夫是高中物理老师",
        "dog": "用户家里有一只柯基犬叫豆豆",
        "yoga": "用户每周二和周四晚上练瑜伽",
        "coffee": "用户早上习惯喝拿铁",
        "travel": "用户计划明年春天去日本京都旅游",
        "back": "用户有腰椎间盘突出，不能久坐",
        "piano": "用户小时候学过八年钢琴",
        "phone": "用户用的是华为手机",
        "commute": "用户每天坐地铁二号线通勤",
        "book": "用户最喜欢的作家是余华",
        "parents": "用户的父母住在成都",
        "cook": "用户周末喜欢在家做红烧肉给家人吃",
    },
    "chen": {
        "job": "用户是一名自由摄影师，主要拍婚礼",
        "home": "用户搬到了广州天河区",
        "lactose": "用户乳糖不耐受，不能喝牛奶",
        "swim": "用户每周一三五中午去游泳",
        "bike": "用户骑自行车上班",
        "wife": "用户的太太是一名空姐",
        "fish": "用户在客厅养了一缸热带鱼",
        "guitar": "用户会弹吉他，最近在学指弹",
        "eyes": "用户是高度近视，戴隐形眼镜",
        "budget": "用户每个月存下工资的三成",
        "tool": "用户用Lightroom修照片",
        "dad": "用户的爸爸去年退休了，喜欢钓鱼",
        "sweet": "用户特别爱吃甜食，尤其是蛋糕",
        "sleep": "用户习惯晚上十点前睡觉，早上六点起床",
        "dialect": "用户会说粤语和普通话",
    },
}

# Superseded facts: (user, key of the memory that replaced it, the old text). The old text
# is added first; a question about the fact must find the new memory.
OLD_FACTS: list[tuple[str, str, str]] = [
    ("amy", "home", "I live in Lisbon, close to the Alfama district."),
    ("ben", "car", "I drive an old red Ford Fiesta."),
    ("cora", "phone", "I use an Android phone and a Windows laptop."),
    ("xiaowang", "home", "用户住在北京朝阳区"),
    ("lina", "phone", "用户用的是苹果手机"),
    ("chen", "home", "用户住在上海浦东"),
]


def _q(lang: Lang, kind: Kind, user: str, pairs: list[tuple[str, str]]) -> list[Question]:
    return [Question(lang, kind, user, text, (key,)) for text, key in pairs]


QUESTIONS: list[Question] = [
    *_q(
        "en",
        "lexical",
        "amy",
        [
            ("Since when am I vegetarian?", "veg"),
            ("Which ward do I work in at the hospital?", "job"),
            ("When do Lily's piano lessons start?", "kid"),
            ("Where do I rent a flat?", "home"),
            ("How do I take my coffee?", "coffee"),
            ("What is my golden retriever called?", "pet"),
            ("Which days do I go swimming?", "swim"),
            ("What am I allergic to?", "allergy"),
            ("Where do I write my notes?", "notes"),
            ("What subject does Tom teach?", "spouse"),
            ("Which seats do I prefer?", "seat"),
            ("Why am I learning Japanese?", "lang"),
            ("When do I take my blood pressure tablets?", "bp"),
            ("What do I cook on weekends?", "curry"),
        ],
    ),
    *_q(
        "en",
        "paraphrase",
        "amy",
        [
            ("Do I eat meat?", "veg"),
            ("What is my profession?", "job"),
            ("How old is my kid?", "kid"),
            ("Which city is my home?", "home"),
            ("What hot beverage do I like?", "coffee"),
            ("What kind of pet do I own?", "pet"),
            ("When do I do laps in the pool?", "swim"),
            ("Which antibiotic must doctors avoid giving me?", "allergy"),
            ("What does my spouse do for a living?", "spouse"),
            ("Where do I like to sit on a plane?", "seat"),
            ("What language am I studying?", "lang"),
            ("Who moved into our house after an operation?", "mum"),
        ],
    ),
    *_q(
        "en",
        "lexical",
        "ben",
        [
            ("Where is the fintech startup I work at?", "job"),
            ("Can I have cheese?", "diet"),
            ("What car do I drive?", "car"),
            ("When is the Berlin marathon?", "run"),
            ("When did the twins turn four?", "kids"),
            ("What is my coding setup?", "editor"),
            ("What does Sara design?", "wife"),
            ("What is our cat called?", "cat"),
            ("Which band do I play bass in?", "music"),
            ("Which knee had surgery?", "knee"),
            ("When is the team standup?", "standup"),
            ("Where do we rent a cabin?", "holiday"),
        ],
    ),
    *_q(
        "en",
        "paraphrase",
        "ben",
        [
            ("What is my profession?", "job"),
            ("Which dairy products upset my stomach?", "diet"),
            ("Which vehicle is mine?", "car"),
            ("Am I preparing for a race?", "run"),
            ("How old are my children?", "kids"),
            ("What text editor do I program with?", "editor"),
            ("What is my spouse's profession?", "wife"),
            ("What time do I fall asleep?", "sleep"),
            ("What breed is our pet?", "cat"),
            ("Which instrument do I perform?", "music"),
            ("Where do we spend our summer vacation?", "holiday"),
            ("What does my sibling do?", "brother"),
        ],
    ),
    *_q(
        "en",
        "lexical",
        "cora",
        [
            ("What do I teach?", "job"),
            ("Why am I on a gluten-free diet?", "diet"),
            ("When do I not commute by bicycle?", "bike"),
            ("What breed is Pepper?", "dog"),
            ("Where do my parents live?", "parents"),
            ("Which evenings do I do yoga?", "yoga"),
            ("Who is my favourite author?", "book"),
            ("Which iPhone do I use?", "phone"),
            ("What do I grow on my balcony?", "garden"),
            ("When do I get migraines?", "migraine"),
            ("Where does Sam work night shifts?", "partner"),
            ("When do I bake sourdough?", "baking"),
        ],
    ),
    *_q(
        "en",
        "paraphrase",
        "cora",
        [
            ("What is my profession?", "job"),
            ("Can I eat wheat?", "diet"),
            ("How do I get to work?", "bike"),
            ("What animal do I own?", "dog"),
            ("Where is my mom and dad's home?", "parents"),
            ("Which writer do I like reading?", "book"),
            ("What vegetables and herbs am I raising?", "garden"),
            ("What gives me headaches?", "migraine"),
            ("What job does my significant other have?", "partner"),
            ("How long have I been a pianist?", "piano"),
            ("How do I keep a budget?", "budget"),
            ("When should someone wish me many happy returns?", "birthday"),
        ],
    ),
    *_q(
        "zh",
        "lexical",
        "xiaowang",
        [
            ("用户喜欢吃辣吗", "spicy"),
            ("用户在哪家公司上班", "job"),
            ("用户现在住在哪里", "home"),
            ("用户的猫叫什么名字", "cat"),
            ("用户什么时候去跑步", "run"),
            ("用户下午喝什么茶", "tea"),
            ("用户对什么过敏", "allergy"),
            ("用户在准备什么考试", "english"),
            ("用户开什么车", "car"),
            ("用户最爱吃什么火锅", "hotpot"),
        ],
    ),
    *_q(
        "zh",
        "paraphrase",
        "xiaowang",
        [
            ("我能点四川菜吗", "spicy"),
            ("我做什么工作", "job"),
            ("我的宠物是什么", "cat"),
            ("我平时怎么锻炼身体", "run"),
            ("我妈妈做什么生意", "mother"),
            ("哪种坚果我碰不得", "allergy"),
            ("我平常几点休息", "sleep"),
            ("我的座驾是什么", "car"),
            ("我有兄弟姐妹吗", "sister"),
            ("我学外语是为了什么", "english"),
        ],
    ),
    *_q(
        "zh",
        "lexical",
        "lina",
        [
            ("用户在哪家医院当医生", "job"),
            ("用户吃肉吗", "diet"),
            ("用户的儿子几岁", "kid"),
            ("用户的丈夫是做什么的", "husband"),
            ("用户的柯基犬叫什么", "dog"),
            ("用户什么时候练瑜伽", "yoga"),
            ("用户早上喝什么", "coffee"),
            ("用户计划去哪里旅游", "travel"),
            ("用户用的是什么手机", "phone"),
            ("用户最喜欢哪个作家", "book"),
        ],
    ),
    *_q(
        "zh",
        "paraphrase",
        "lina",
        [
            ("我的职业是什么", "job"),
            ("我的孩子多大了", "kid"),
            ("我老公教什么科目", "husband"),
            ("我养了什么宠物", "dog"),
            ("假期我打算出国去哪", "travel"),
            ("我有什么健康问题", "back"),
            ("我会什么乐器", "piano"),
            ("我怎么去上班", "commute"),
            ("我爸妈在哪座城市", "parents"),
            ("休息日我为亲人下厨烧什么", "cook"),
        ],
    ),
    *_q(
        "zh",
        "lexical",
        "chen",
        [
            ("用户主要拍什么", "job"),
            ("用户搬到了哪里", "home"),
            ("用户能喝牛奶吗", "lactose"),
            ("用户什么时候去游泳", "swim"),
            ("用户的太太做什么工作", "wife"),
            ("用户养了什么鱼", "fish"),
            ("用户在学什么吉他", "guitar"),
            ("用户用什么修照片", "tool"),
            ("用户爸爸喜欢做什么", "dad"),
            ("用户会说什么方言", "dialect"),
        ],
    ),
    *_q(
        "zh",
        "paraphrase",
        "chen",
        [
            ("我的职业是什么", "job"),
            ("我目前定居在哪座城市", "home"),
            ("早餐我可以来一杯奶吗", "lactose"),
            ("我怎么去公司", "bike"),
            ("我老婆从事什么行业", "wife"),
            ("我会什么乐器", "guitar"),
            ("我视力怎么样", "eyes"),
            ("我怎么理财", "budget"),
            ("我喜欢吃什么零食", "sweet"),
            ("我作息规律吗", "sleep"),
        ],
    ),
]


def labelled_lives() -> list[Life]:
    """Every labelled user: the long lives first, then the hand-written ones."""
    lives = [live(_life_en.SCRIPT, user) for user in LONG_LIVES["en"]]
    lives += [live(_life_zh.SCRIPT, user) for user in LONG_LIVES["zh"]]
    for user, memories in MEMORIES.items():
        rng = random.Random(user)
        facts = [Fact(f"old {key}", text, rng.randrange(90)) for u, key, text in OLD_FACTS
                 if u == user]  # fmt: skip
        facts += [Fact(key, text, rng.randrange(120, DAYS)) for key, text in memories.items()]
        questions = tuple(q for q in QUESTIONS if q.user == user)
        lives.append(Life(user, questions[0].lang, tuple(facts), questions))
    return lives
